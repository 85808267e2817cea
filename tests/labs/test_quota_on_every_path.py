"""A quota refusal reads the same on the web form, the API and the CLI's server."""

import pytest
from django.urls import reverse

from jobs.models import Job
from tests.conftest import script_upload
from tests.factories import LabFactory, MembershipFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_lab(student, fake_bridge):
    lab = LabFactory(name="Vision", max_gpus_per_job=1, max_queued_jobs=1)
    MembershipFactory(lab=lab, user=student)
    return lab


def test_the_web_form_shows_the_refusal_and_keeps_the_values(student_client, small_lab):
    response = student_client.post(
        reverse("jobs:new"),
        {
            "name": "too big",
            "gpus": 2,
            "cpus": 1,
            "memory_gb": 2,
            "script": script_upload(),
            "lab": small_lab.pk,
        },
    )
    body = response.content.decode()
    assert response.status_code == 400
    assert "Your lab “Vision” may use at most 1 GPU per job; this one asks for 2." in body
    assert 'value="too big"' in body
    assert not Job.objects.exists()


def test_the_form_offers_only_the_users_labs(student_client, small_lab):
    LabFactory(name="Secret lab")
    body = student_client.get(reverse("jobs:new")).content.decode()
    assert "Vision" in body
    assert "Secret lab" not in body


def post(api, **fields):
    data = {"name": "x", "gpus": 0, "script": script_upload()} | fields
    return api.post(reverse("api:job-list"), data, format="multipart")


def test_the_api_answers_403_quota_exceeded_naming_the_field(api, small_lab):
    response = post(api, gpus=2)
    error = response.json()["error"]
    assert response.status_code == 403
    assert error["code"] == "quota_exceeded"
    assert error["fields"] == {"gpus": [error["message"]]}


def test_a_limit_without_a_field_has_no_fields(api, small_lab):
    first = post(api, gpus=1)
    assert first.status_code == 201
    assert first.json()["lab"] == "Vision"
    second = post(api, gpus=1)
    assert second.status_code == 403
    assert "jobs waiting to run" in second.json()["error"]["message"]
    assert "fields" not in second.json()["error"]


def test_the_api_charges_the_lab_named_and_refuses_another(api, student, small_lab):
    other = LabFactory(name="NLP")
    MembershipFactory(lab=LabFactory(name="Robotics"), user=student)
    chosen = post(api, lab="Robotics")
    assert chosen.status_code == 201, chosen.json()
    assert Job.objects.get().lab.name == "Robotics"
    refused = post(api, lab=other.name)
    assert refused.json()["error"]["fields"] == {"lab": ["You are not a member of that lab."]}


def test_me_reports_each_labs_limits_and_usage(api, small_lab):
    body = api.get(reverse("api:me")).json()
    assert body["quotas"][0]["lab"] == "Vision"
    assert body["quotas"][0]["limits"]["max_gpus_per_job"] == 1
    assert body["quotas"][0]["limits"]["scope"]["max_gpus_per_job"] == "lab"
    assert body["quotas"][0]["accounting_group"] == "group_vision"
