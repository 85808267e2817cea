"""The template pages: a lead publishes through the form, a student runs one through its
short form; bad input comes back with the reason beside its field and makes nothing."""

import json

import pytest
from django.urls import reverse

from job_templates.models import TemplateVersion
from jobs.models import Job
from labs.models import Lab, Membership
from tests.conftest import script_upload
from tests.job_templates.conftest import FORM, TRAINER, published

pytestmark = pytest.mark.django_db


def publish_form(lab, **fields):
    return {
        "lab": lab.pk,
        "name": "finetune",
        "title": "Fine-tune a text classifier",
        "visibility": "lab",
        "project": script_upload(TRAINER),
        "entry_command": "python train.py",
        "gpus": 0,
        "cpus": 1,
        "memory_mb": 2048,
        "disk_mb": 4096,
        "output_paths": "outputs",
        "parameters": json.dumps(FORM),
        **fields,
    }


def test_a_lead_publishes_through_the_form_and_lands_on_the_template(people, fake_bridge, client):
    client.force_login(people.lead)
    assert "Publish a template" in client.get(reverse("job_templates:list")).content.decode()
    response = client.post(reverse("job_templates:publish"), publish_form(people.lab))
    version = TemplateVersion.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("job_templates:detail", args=[version.pk])


def test_bad_parameters_come_back_beside_their_field(people, fake_bridge, client):
    client.force_login(people.lead)
    response = client.post(
        reverse("job_templates:publish"),
        publish_form(
            people.lab, parameters='[{"name": "x", "type": "integer", "argument": "--x;id"}]'
        ),
    )
    assert response.status_code == 400
    assert "argument must be a flag" in response.content.decode()
    assert not TemplateVersion.objects.exists()


def test_a_student_cannot_open_the_publish_page(people, fake_bridge, client):
    client.force_login(people.student)
    assert client.get(reverse("job_templates:publish")).status_code == 404
    assert "Publish a template" not in client.get(reverse("job_templates:list")).content.decode()


def test_a_student_runs_a_template_with_its_short_form(people, fake_bridge, client):
    version = published(people.lead, people.lab)
    client.force_login(people.student)
    page = client.get(reverse("job_templates:detail", args=[version_pk(version)]))
    text = page.content.decode()
    assert 'data-parameter="epochs"' in text and 'max="20"' in text
    assert "nightshift run vision_robotics/finetune@1" in text
    response = client.post(
        reverse("job_templates:detail", args=[version_pk(version)]),
        {"epochs": "4", "learning_rate": "0.01", "optimizer": "sgd", "run_name": "my run"},
    )
    job = Job.objects.get()
    assert response["Location"] == reverse("jobs:detail", args=[job.public_id])
    assert job.parameters == {"epochs": 4, "learning_rate": 0.01, "optimizer": "sgd"}
    page = client.get(response["Location"]).content.decode()
    assert 'data-role="from-template"' in page
    assert "vision_robotics/finetune@1" in page and "Fine-tune a text classifier" in page


def test_an_out_of_bounds_value_comes_back_with_the_reason(people, fake_bridge, client):
    version = published(people.lead, people.lab)
    client.force_login(people.student)
    response = client.post(
        reverse("job_templates:detail", args=[version_pk(version)]),
        {"epochs": "50", "learning_rate": "0.01", "optimizer": "rm -rf"},
    )
    assert response.status_code == 400
    text = response.content.decode()
    assert "less than or equal to 20" in text and "Select a valid choice" in text
    assert not Job.objects.exists()


def test_another_labs_member_gets_not_found(people, fake_bridge, client):
    version = published(people.lead, people.lab)
    client.force_login(people.outsider)
    page = client.get(reverse("job_templates:detail", args=[version_pk(version)]))
    assert page.status_code == 404
    assert "finetune" not in client.get(reverse("job_templates:list")).content.decode()


def version_pk(version: dict) -> int:
    return TemplateVersion.objects.get(template__name=version["name"], number=version["number"]).pk


def test_a_new_version_keeps_the_project_unless_another_is_uploaded(people, fake_bridge, client):
    first = published(people.lead, people.lab)
    client.force_login(people.lead)
    page = client.get(reverse("job_templates:publish"), {"from": version_pk(first)})
    assert 'name="project_from"' in page.content.decode()
    fields = publish_form(
        people.lab, project_from=version_pk(first), parameters=json.dumps(FORM[:1])
    )
    del fields["project"]
    response = client.post(reverse("job_templates:publish"), fields)
    assert response.status_code == 302, response.content.decode()[-2000:]
    second = TemplateVersion.objects.get(number=2)
    assert second.project_sha256 == first["project_sha256"] and len(second.parameters) == 1


def test_without_a_project_or_a_version_to_keep_it_from_publishing_is_refused(
    people, fake_bridge, client
):
    client.force_login(people.lead)
    fields = publish_form(people.lab)
    del fields["project"]
    response = client.post(reverse("job_templates:publish"), fields)
    assert response.status_code == 400 and "Upload the project" in response.content.decode()


def test_keeping_the_project_of_a_version_the_lead_may_not_see_is_refused(
    people, fake_bridge, client
):
    first = published(people.lead, people.lab)  # seen by its own lab only
    Membership.objects.filter(user=people.outsider).update(role="lead")
    client.force_login(people.outsider)
    other_lab = Lab.objects.get(memberships__user=people.outsider)
    fields = publish_form(other_lab, project_from=version_pk(first))
    del fields["project"]
    response = client.post(reverse("job_templates:publish"), fields)
    assert response.status_code == 400
    assert "No such template that you may use." in response.content.decode()
    assert TemplateVersion.objects.count() == 1
