"""`manage.py drain`: maintenance stops every way of submitting, says why, and loses nothing."""

import pytest
from django.core.management import call_command
from django.urls import reverse

from audit.models import AuditEntry
from experiments.models import Sweep
from jobs.models import Job
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db


def drain(*args: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command("drain", *args, stdout=out)
    return out.getvalue()


def test_a_drained_portal_refuses_api_submissions_with_the_banner_text(api, fake_bridge):
    said = drain("--message", "Upgrading to 2.0 until 14:00")
    assert "Draining since" in said and "Upgrading to 2.0 until 14:00" in said
    response = api.post(
        reverse("api:job-list"),
        {"name": "x", "gpus": 0, "script": script_upload()},
        format="multipart",
    )
    assert response.status_code == 503
    error = response.json()["error"]
    assert (error["code"], error["message"]) == ("maintenance", "Upgrading to 2.0 until 14:00")
    assert not Job.objects.exists()
    assert fake_bridge.active_jobs() == []


def test_sweeps_are_refused_too(api, fake_bridge):
    drain()
    response = api.post(
        reverse("api:sweep-list"),
        {
            "name": "grid",
            "gpus": 0,
            "script": script_upload(),
            "parameters": '{"grid": {"lr": [0.1, 0.2]}}',
        },
        format="multipart",
    )
    assert response.status_code == 503, response.json()
    assert not Sweep.objects.exists() and not Job.objects.exists()


def test_every_page_shows_the_banner_and_the_form_keeps_what_was_typed(student_client, fake_bridge):
    drain("--message", "Back at 6 pm")
    page = student_client.get(reverse("jobs:list"))
    assert 'class="message maintenance" role="alert">Back at 6 pm<' in page.content.decode()
    response = student_client.post(
        reverse("jobs:new"),
        {
            "name": "typed-by-hand",
            "script": script_upload(),
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 1,
        },
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "Back at 6 pm" in body and 'value="typed-by-hand"' in body
    assert not Job.objects.exists()


def test_drain_off_accepts_submissions_again_and_both_are_audited(api, fake_bridge):
    drain("--message", "short break")
    assert "Not draining" in drain("--off")
    response = api.post(
        reverse("api:job-list"),
        {"name": "x", "gpus": 0, "script": script_upload()},
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    drains = AuditEntry.objects.filter(action__startswith="portal.").order_by("at", "id")
    assert list(drains.values_list("action", "detail")) == [
        ("portal.drain", "short break"),
        ("portal.undrain", ""),
    ]


def test_status_only_reports(fake_bridge):
    assert "Not draining" in drain("--status")
    drain()
    assert "new jobs cannot be submitted" in drain("--status")
    assert "Not draining" in drain("--off")
