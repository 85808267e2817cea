"""The pool tests' kit, whichever app's folder holds them: a signed-in web client, an
upload through the form, and owners at their desks."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from jobs.models import Job
from tests.conftest import script_upload
from tests.helpers import OwnerAtDesk, owners_present, wait_for


@pytest.fixture
def web(client, transactional_db):
    """The test client, signed in as a student, ada."""
    user = get_user_model().objects.create_user("ada", password="a-long-test-password")
    client.force_login(user)
    return client


def upload(web, script_text: str, **fields) -> Job:
    """A job sent through the new-job form, as a student sends one (no GPU, 256 MB)."""
    data = {
        "name": "job",
        "gpus": 0,
        "cpus": 1,
        "memory_gb": 0.25,
        "arguments": "",
        "script": script_upload(script_text) if script_text else None,
    }
    data.update(fields)
    response = web.post(reverse("jobs:new"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    return Job.objects.latest("created_at")


@pytest.fixture
def desks():
    """Owners who come back to their desks in a test, all gone again after it."""
    owner = OwnerAtDesk()
    yield owner
    owner.leave_all()
    wait_for(lambda: not owners_present(), timeout=60, what="owners gone from every desk")
