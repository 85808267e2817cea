"""A lab lead publishes a job template through the API: everything a run needs is checked
with the defaults before it is stored; versions count up; only leads publish."""

import json

import pytest
from django.urls import reverse

from audit.models import AuditEntry
from job_templates.models import TemplateVersion
from tests.conftest import client_with_token
from tests.job_templates.conftest import FORM, publish, published

pytestmark = pytest.mark.django_db


def test_a_lead_publishes_a_template_with_its_typed_parameter_form(people, fake_bridge):
    version = published(people.lead, people.lab, card="# Fine-tune\n\nGive it **text**.")
    assert version["reference"] == "vision_robotics/finetune@1"
    assert version["title"] == "Fine-tune a text classifier"
    assert [p["name"] for p in version["parameters"]] == [
        "epochs",
        "learning_rate",
        "optimizer",
        "note",
    ]
    epochs = version["parameters"][0]
    assert (epochs["min"], epochs["max"], epochs["default"], epochs["argument"]) == (
        1,
        20,
        3,
        "--epochs",
    )
    assert "<strong>text</strong>" in version["card_html"]
    assert version["entry_command"] == "python train.py --base bert" and version["runs"] == 0
    assert AuditEntry.objects.filter(action="template.publish").count() == 1


def test_publishing_the_same_name_again_adds_a_version(people, fake_bridge):
    published(people.lead, people.lab)
    second = published(people.lead, people.lab, parameters=FORM[:1])
    assert second["reference"] == "vision_robotics/finetune@2"
    latest = client_with_token(people.student).get(
        reverse("api:template-latest", kwargs={"lab": "vision_robotics", "name": "finetune"})
    )
    assert latest.json()["number"] == 2 and len(latest.json()["parameters"]) == 1


def test_a_student_may_not_publish_a_template(people, fake_bridge):
    response = publish(people.student, people.lab)
    assert response.status_code == 400
    error = response.json()["error"]
    assert "lab" in error["fields"] and "leads" in error["message"]
    assert not TemplateVersion.objects.exists()


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"entry_command": "python other.py"}, "entry_command", "The project is train.py"),
        ({"entry_command": "bash -c 'rm -rf ~'"}, "entry_command", "Start with python"),
        ({"parameters": "[{"}, "parameters", "not JSON"),
        (
            {
                "parameters": json.dumps(
                    [{"name": "x", "type": "integer", "environment": "LD_PRELOAD"}]
                )
            },
            "parameters",
            "set by Nightshift",
        ),
        ({"resources": json.dumps({"gpus": 99})}, "gpus", ""),
        ({"resources": json.dumps({"shell": "sh"})}, "resources", "Unknown resource"),
        ({"name": "../../etc"}, "name", ""),
        ({"title": "two\nlines"}, "title", "One line"),
        ({"software": "no-such-env@1"}, "software_environment", ""),
        ({"datasets": ["no-such-data"]}, "datasets", ""),
        ({"models": ["vision_robotics/no-such-model"]}, "models", ""),
        ({"card": "x" * 20_001}, "card", ""),
    ],
)
def test_a_template_that_could_not_run_is_refused_with_the_field_and_the_reason(
    people, fake_bridge, fields, field, words
):
    response = publish(people.lead, people.lab, **fields)
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert field in error["fields"], error
    assert words in error["message"]
    assert not TemplateVersion.objects.exists()


def test_a_project_archive_must_hold_the_script_its_entry_command_starts(people, fake_bridge):
    from tests.datasets.files import upload, zip_of

    response = publish(
        people.lead,
        people.lab,
        project=upload(zip_of({"src/run.py": "print(1)"}), name="project.zip"),
        entry_command="python train.py",
    )
    assert response.status_code == 400 and "has no train.py" in response.json()["error"]["message"]
    response = publish(
        people.lead,
        people.lab,
        project=upload(zip_of({"src/run.py": "print(1)"}), name="project.zip"),
        entry_command="python src/run.py",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["project_name"] == "project.zip"


def test_a_hostile_card_is_shown_as_text_on_the_page_and_in_the_api(people, fake_bridge, client):
    hostile = "<script>alert(1)</script> [x](javascript:alert(2)) <img src=x onerror=alert(3)>"
    version = published(people.lead, people.lab, card=hostile)
    assert "<script" not in version["card_html"] and "javascript:" not in version["card_html"]
    assert "<img" not in version["card_html"]
    client.force_login(people.student)
    page = client.get(reverse("job_templates:list")).content.decode()
    assert "<script>alert(1)" not in page
    detail = TemplateVersion.objects.get()
    page = client.get(reverse("job_templates:detail", args=[detail.pk])).content.decode()
    assert "<script>alert(1)" not in page and "<img src=x" not in page
