"""Admins define software environments; students pick one on the job form."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from jobs.models import EnvironmentPreset, Job
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db


def submit_with(client, preset):
    return client.post(
        reverse("jobs:new"),
        {"name": "x", "gpus": 0, "cpus": 1, "memory_gb": 1, "environment_preset": preset.pk,
         "script": script_upload()},
    )  # fmt: skip


def test_system_python_is_the_default_environment(student_client, fake_bridge):
    body = student_client.get(reverse("jobs:new")).content.decode()
    assert "System Python" in body
    assert EnvironmentPreset.objects.get(is_default=True).name == "System Python"


def test_a_job_records_the_chosen_environment(student_client, fake_bridge):
    preset = EnvironmentPreset.objects.create(name="Conda", python="/opt/conda/bin/python")
    response = submit_with(student_client, preset)
    assert response.status_code == 302
    assert Job.objects.get().request["python"] == "/opt/conda/bin/python"


def test_a_container_environment_no_workstation_runs_is_refused(student_client, fake_bridge):
    preset = EnvironmentPreset.objects.create(
        name="PyTorch", kind="container", container_image="docker://pytorch/pytorch:2.4.0"
    )
    response = submit_with(student_client, preset)
    assert response.status_code == 400
    assert "no workstation in the pool runs containers" in response.content.decode()


def test_an_inactive_environment_cannot_be_chosen(student_client, fake_bridge):
    preset = EnvironmentPreset.objects.create(name="Old", is_active=False)
    response = submit_with(student_client, preset)
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()


@pytest.mark.parametrize(
    "fields, message",
    [({"kind": "container", "container_image": ""}, "needs an image"),
     ({"kind": "container", "container_image": "bad image"}, "without spaces"),
     ({"python": "python3"}, "absolute path")],
)  # fmt: skip
def test_an_admin_cannot_save_a_preset_htcondor_would_choke_on(fields, message):
    with pytest.raises(ValidationError, match=message):
        EnvironmentPreset(name="x", **fields).full_clean()
