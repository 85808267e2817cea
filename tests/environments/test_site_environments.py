"""Admins' site environments (once presets) are picked on the job form and recorded."""

import pytest
from django.urls import reverse

from environments.models import Environment, EnvironmentVersion
from environments.services import EnvironmentError, environment_create
from jobs.models import Job
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db


def site_environment(name, *, python="", container_image="", is_active=True):
    environment = Environment.objects.create(
        name=name,
        visibility="site",
        is_active=is_active,
        kind="container" if container_image else "packages",
    )
    EnvironmentVersion.objects.create(
        environment=environment, number=1, python=python, container_image=container_image
    )
    return environment


def submit_with(client, reference):
    return client.post(
        reverse("jobs:new"),
        {
            "name": "x",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 1,
            "software_environment": reference,
            "script": script_upload(),
        },
    )


def test_the_system_python_preset_became_the_default_site_environment(student_client):
    default = Environment.objects.get(is_default=True)
    assert (default.name, default.visibility, default.owner) == ("System Python", "site", None)
    assert "System Python (version 1)" in student_client.get(reverse("jobs:new")).content.decode()


def test_a_job_records_the_chosen_environment_and_runs_its_python(student_client, fake_bridge):
    site_environment("Conda", python="/opt/conda/bin/python")
    response = submit_with(student_client, "Conda@1")
    assert response.status_code == 302
    job = Job.objects.get()
    assert job.request["python"] == "/opt/conda/bin/python"
    assert job.source["environment"]["reference"] == "Conda@1"


def test_a_job_naming_no_environment_gets_the_site_default(student_client, fake_bridge):
    assert submit_with(student_client, "").status_code == 302
    assert Job.objects.get().source["environment"]["name"] == "System Python"


def test_a_container_environment_no_workstation_runs_is_refused(student_client, fake_bridge):
    site_environment("PyTorch", container_image="docker://pytorch/pytorch:2.4.0")
    response = submit_with(student_client, "PyTorch@1")
    assert response.status_code == 400
    assert "no workstation in the pool runs containers" in response.content.decode()


def test_an_inactive_environment_cannot_be_chosen(student_client, fake_bridge):
    site_environment("Old", is_active=False)
    response = submit_with(student_client, "Old@1")
    assert response.status_code == 400
    assert "No environment called &#x27;Old&#x27; that you may use" in response.content.decode()


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"container_image": "bad image"}, "without spaces"),
        ({"python": "python3"}, "absolute path"),
        ({"container_image": "docker://x", "requirements": "numpy"}, "from the image"),
    ],
)
def test_an_admin_cannot_save_a_site_environment_htcondor_would_choke_on(
    django_user_model, fields, message
):
    admin = django_user_model.objects.create_user("root", is_staff=True)
    with pytest.raises(EnvironmentError, match=message):
        environment_create(user=admin, name="x", visibility="site", **fields)
