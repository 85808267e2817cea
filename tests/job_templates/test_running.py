"""A student runs a template with a few values, through the API: the values are checked
against the form, and reach the script (a real launcher process) as arguments and
environment values; bad values are refused by name and nothing is made."""

import json

import pytest
from django.urls import reverse

from audit.models import AuditEntry
from jobs.models import Job
from tests.conftest import client_with_token
from tests.datasets.test_delivery import launch
from tests.job_templates.conftest import published, run

pytestmark = pytest.mark.django_db


@pytest.fixture
def template(people, fake_bridge):
    return published(people.lead, people.lab)


def started(response) -> Job:
    assert response.status_code == 201, response.json()
    return Job.objects.get(public_id=response.json()["id"])


def test_a_students_values_reach_the_script_as_arguments_and_environment_values(
    people, template, tmp_path
):
    job = started(
        run(people.student, parameters={"epochs": "5", "learning_rate": 0.01, "optimizer": "sgd"})
    )
    assert job.name == "Fine-tune a text classifier" and job.owner == people.student
    assert job.parameters == {"epochs": 5, "learning_rate": 0.01, "optimizer": "sgd"}
    ran = launch(job, None)
    assert ran.returncode == 0, ran.stderr
    assert 'argv ["--base", "bert", "--epochs=5", "--lr=0.01"]' in ran.stdout
    assert "optimizer sgd" in ran.stdout
    assert json.loads(ran.stdout.split("parameters ", 1)[1].splitlines()[0]) == job.parameters
    assert AuditEntry.objects.filter(action="template.run").count() == 1


def test_left_out_values_take_their_defaults(people, template):
    job = started(run(people.student, name="my first run"))
    assert job.name == "my first run"
    assert job.request["arguments"] == ["--base", "bert", "--epochs=3", "--lr=0.001"]
    assert ["OPTIMIZER", "adam"] in job.request["environment"]


def test_shell_syntax_in_a_text_value_reaches_the_script_as_one_argument(
    people, template, tmp_path
):
    hostile = "$(touch pwned) `id`; rm -rf ~ \"'\\"
    job = started(run(people.student, parameters={"note": hostile}))
    ran = launch(job, None)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout.split("argv ", 1)[1].splitlines()[0])[-1] == f"--note={hostile}"
    assert not (job.directory / "pwned").exists()


@pytest.mark.parametrize(
    ("values", "field", "words"),
    [
        ({"epochs": "5; rm -rf /"}, "epochs", "whole number"),
        ({"epochs": 21}, "epochs", "from 1 to 20"),
        ({"epochs": True}, "epochs", "number"),
        ({"learning_rate": "nan"}, "learning_rate", "finite"),
        ({"optimizer": "adamw"}, "optimizer", "one of adam, sgd"),
        ({"note": "two\nlines"}, "note", "one line"),
        ({"note": "x" * 61}, "note", "at most 60"),
        ({"script": "evil.py"}, "script", "no parameter 'script'"),
        ({"epochs": {"$gt": 1}}, "epochs", "number"),
    ],
)
def test_a_bad_value_is_refused_by_its_name_and_nothing_is_made(
    people, template, values, field, words
):
    response = run(people.student, parameters=values)
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert field in error["fields"] and words in error["message"], error
    assert not Job.objects.exists()


def test_a_version_can_be_pinned_and_each_counts_its_runs(people, template):
    published(people.lead, people.lab, parameters=[])
    started(run(people.student, reference="vision_robotics/finetune@1"))
    started(run(people.labmate, reference="vision_robotics/finetune"))
    first = client_with_token(people.student).get(
        reverse(
            "api:template-version",
            kwargs={"lab": "vision_robotics", "name": "finetune", "number": 1},
        )
    )
    assert first.json()["runs"] == 1
    listed = client_with_token(people.student).get(reverse("api:template-list")).json()
    assert [v["reference"] for v in listed["results"]] == ["vision_robotics/finetune@2"]


def test_another_labs_member_can_neither_see_nor_run_a_lab_template(people, template):
    api = client_with_token(people.outsider)
    assert api.get(reverse("api:template-list")).json()["results"] == []
    shown = api.get(
        reverse("api:template-latest", kwargs={"lab": "vision_robotics", "name": "finetune"})
    )
    assert shown.status_code == 404
    assert run(people.outsider).status_code == 404
    assert not Job.objects.exists()


def test_a_template_shared_with_the_site_runs_for_everyone(people, fake_bridge):
    published(people.lead, people.lab, name="mnist", visibility="site")
    job = started(run(people.outsider, reference="vision_robotics/mnist"))
    assert job.owner == people.outsider


def test_a_private_template_is_its_publishers_alone(people, fake_bridge):
    published(people.lead, people.lab, name="draft", visibility="private")
    assert run(people.student, reference="vision_robotics/draft").status_code == 404
    started(run(people.lead, reference="vision_robotics/draft"))


def test_the_catalogue_searches_titles_and_cards(people, fake_bridge):
    published(people.lead, people.lab, name="finetune", card="Sentiment of reviews")
    published(people.lead, people.lab, name="detect", title="Detect objects")
    api = client_with_token(people.student)
    found = api.get(reverse("api:template-list"), {"q": "sentiment"}).json()["results"]
    assert [v["name"] for v in found] == ["finetune"]
    found = api.get(reverse("api:template-list"), {"q": "objects"}).json()["results"]
    assert [v["name"] for v in found] == ["detect"]


@pytest.mark.django_db(transaction=True)  # the dataset's import runs once its upload commits
def test_a_dataset_parameter_attaches_the_students_choice_and_names_its_folder(people, fake_bridge):
    from tests.datasets.test_delivery import push

    published(
        people.lead,
        people.lab,
        name="reader",
        parameters=[{"name": "data", "type": "dataset", "label": "Training data"}],
    )
    push(client_with_token(people.student), name="reviews")
    job = started(
        run(people.student, reference="vision_robotics/reader", parameters={"data": "reviews"})
    )
    assert job.request["arguments"][-1] == "--data=datasets/reviews"
    assert [d["reference"] for d in job.source["datasets"]] == ["reviews@1"]
    refused = run(
        people.labmate, reference="vision_robotics/reader", parameters={"data": "reviews"}
    )  # the student's own dataset
    assert refused.status_code == 400
    assert "not a dataset you may use" in refused.json()["error"]["message"]
