"""A model made by a template's run is served, in one click or one call, as a live session
running the template's serve command with the model at models/NAME/."""

import pytest
from django.urls import reverse

from jobs.models import Job
from tests.conftest import client_with_token
from tests.job_templates.conftest import TRAINER, published, run
from tests.model_registry.conftest import published as model_published

pytestmark = pytest.mark.django_db(transaction=True)

SERVER = TRAINER + "\n# serve.py would answer HTTP on NIGHTSHIFT_SERVE_PORT\n"


@pytest.fixture
def model(people, fake_bridge, finish):
    """bert-small@1, published by the student from a run of a template that serves."""
    published(people.lead, people.lab, serve_command="python train.py --serve")
    response = run(people.student)
    assert response.status_code == 201, response.json()
    job = finish(Job.objects.get(public_id=response.json()["id"]))
    return model_published(people.student, job, visibility="lab")


def serve(user, reference="vision_robotics/bert-small@1", **body):
    lab, rest = reference.split("/")
    name, number = rest.split("@")
    return client_with_token(user).post(
        reverse("api:model-serve", kwargs={"lab": lab, "name": name, "number": int(number)}),
        body,
        format="json",
    )


def test_a_labmate_serves_the_model_with_the_template_that_made_it(people, model):
    response = serve(people.labmate)
    assert response.status_code == 201, response.json()
    job = Job.objects.get(public_id=response.json()["id"])
    assert job.owner == people.labmate and job.name == "Serve vision_robotics/bert-small@1"
    assert job.request["live_services"] == ["serve"]
    assert job.request["arguments"] == ["--serve"]
    [record] = job.source["models"]
    assert record["reference"] == "vision_robotics/bert-small@1"
    assert job.parameters == {
        "model": "vision_robotics/bert-small@1",
        "model_dir": "models/bert-small",
    }


def test_the_model_page_offers_serving_in_one_click(people, model, client):
    client.force_login(people.labmate)
    from model_registry.models import ModelVersion

    version = ModelVersion.objects.get()
    page = client.get(reverse("models:version", args=[version.pk])).content.decode()
    assert "Serve this model" in page and "Fine-tune a text classifier" in page
    response = client.post(reverse("job_templates:serve", args=[version.pk]))
    assert response.status_code == 302
    job = Job.objects.get(name="Serve vision_robotics/bert-small@1")
    assert response["Location"] == reverse("jobs:detail", args=[job.public_id])


def test_a_template_without_a_serve_command_serves_nothing(
    people, fake_bridge, finished_job, client
):
    published(people.lead, people.lab)  # no serve command
    job = finished_job(people.student, lab=people.lab.name)
    model_published(people.student, job, visibility="lab")
    response = serve(people.labmate)
    assert response.status_code == 400
    assert "No template you may run can serve this model" in response.json()["error"]["message"]
    client.force_login(people.labmate)
    from model_registry.models import ModelVersion

    page = client.get(reverse("models:version", args=[ModelVersion.objects.get().pk]))
    assert "Serve this model" not in page.content.decode()


def test_nobody_outside_the_lab_can_serve_its_model(people, model):
    assert serve(people.outsider).status_code == 404
    assert not Job.objects.filter(name__startswith="Serve").exists()
