"""The job page offers its owner "Publish as a model" once the job has ended; the form
preselects every output file, names the model after the job, and shows refusals in place."""

import pytest
from django.urls import reverse

from model_registry.models import ModelVersion

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_owner_publishes_from_the_job_page_and_lands_on_the_version(
    people, finished_job, client
):
    job = finished_job(people.student, lab=people.lab.name, name="train.py")
    client.force_login(people.student)
    job_page = client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert '<p data-role="publish-model">' in job_page  # shown: the job has ended
    form = client.get(reverse("models:publish", args=[job.public_id])).content.decode()
    assert 'value="train"' in form  # named after the job, without .py
    assert form.count("checked") >= 3  # every output file, to untick
    response = client.post(
        reverse("models:publish", args=[job.public_id]),
        {
            "name": "train",
            "lab": people.lab.pk,
            "visibility": "lab",
            "files": ["outputs/model.pt"],
            "card": "# Train\n\nWorks **well**.",
        },
    )
    version = ModelVersion.objects.get()
    assert response.status_code == 302 and response.url == reverse(
        "models:version", args=[version.pk]
    )
    page = client.get(response.url).content.decode()
    assert "<strong>well</strong>" in page and "vision_robotics/train@1" in page
    assert 'data-metric="loss"' in page and "0.5" in page


def test_a_refusal_is_shown_on_the_form_and_nothing_is_made(people, finished_job, client):
    job = finished_job(people.student, lab=people.lab.name)
    client.force_login(people.student)
    response = client.post(
        reverse("models:publish", args=[job.public_id]),
        {
            "name": "m",
            "lab": people.lab.pk,
            "visibility": "site",
            "files": ["outputs/model.pt"],
        },
    )
    assert response.status_code == 400
    assert "leads (and admins) publish for everyone" in response.content.decode()
    assert not ModelVersion.objects.exists()


def test_no_one_else_reaches_the_form_and_an_unfinished_job_offers_no_button(
    people, finished_job, client
):
    job = finished_job(people.student, lab=people.lab.name)
    for other in (people.labmate, people.lead, people.outsider):
        client.force_login(other)
        assert client.get(reverse("models:publish", args=[job.public_id])).status_code == 404
    client.force_login(people.lead)  # a lead reads the job, but publishing is its owner's
    assert (
        'data-role="publish-model"'
        not in client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    )
