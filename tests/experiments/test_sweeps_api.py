"""The sweeps API: a power user's script submits a sweep and reads its runs."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from experiments import preparation
from experiments.models import Sweep
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.factories import LabFactory, MembershipFactory

pytestmark = pytest.mark.django_db

SWEEPS = reverse("api:sweep-list")


def submit(api, parameters, **fields):
    data = {
        "name": "lr sweep",
        "gpus": 0,
        "script": script_upload(),
        "arguments": ["--lr", "{lr}"],
        "parameters": json.dumps(parameters),
    }
    data |= fields
    return api.post(SWEEPS, data, format="multipart")


def test_a_grid_sweep_is_accepted_with_all_its_runs(api, fake_bridge):
    response = submit(api, {"grid": {"lr": [0.1, 0.01, 0.001], "seed": [1, 2]}})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["kind"] == "grid"
    assert body["run_count"] == 6
    assert body["states"] == {"queued": 6}
    assert [run["parameters"] for run in body["runs"][:2]] == [
        {"lr": 0.1, "seed": 1},
        {"lr": 0.1, "seed": 2},
    ]
    first = Job.objects.get(public_id=body["runs"][0]["id"])
    assert first.request["arguments"] == ["--lr", "0.1"]
    assert body["links"]["web"].endswith(f"/jobs/sweeps/{body['id']}/")


def test_a_large_sweep_is_accepted_at_once_and_says_how_far_its_runs_are_written(
    api, fake_bridge, settings
):
    settings.SWEEP_RUNS_IN_REQUEST = 4
    body = submit(api, {"grid": {"lr": [0.1, 0.01, 0.001], "seed": [1, 2]}}).json()
    assert (body["stage"], body["planned_runs"], body["prepared_runs"]) == ("writing", 6, 0)
    assert (body["run_count"], body["runs"]) == (0, [])
    preparation.sweep_prepare(Sweep.objects.get(public_id=body["id"]).pk)
    detail = api.get(reverse("api:sweep-detail", args=[body["id"]])).json()
    assert (detail["stage"], detail["prepared_runs"], detail["run_count"]) == ("submitting", 6, 6)


def test_a_sweep_and_its_runs_can_be_read_back_and_listed(api, fake_bridge):
    created = submit(api, {"rows": [{"lr": 0.5}, {"lr": 0.25}]}).json()
    detail = api.get(reverse("api:sweep-detail", args=[created["id"]])).json()
    assert [run["index"] for run in detail["runs"]] == [0, 1]
    listed = api.get(SWEEPS).json()
    assert [(s["id"], s["run_count"]) for s in listed["results"]] == [(created["id"], 2)]
    # Each run is an ordinary job too.
    run = api.get(reverse("api:job-detail", args=[detail["runs"][1]["id"]])).json()
    assert run["request"]["arguments"] == ["--lr", "0.25"]


def test_reading_a_sweep_costs_the_same_queries_whatever_its_number_of_runs(api, fake_bridge):
    def queries_to_read(runs: int) -> int:
        created = submit(api, {"grid": {"lr": list(range(runs))}}).json()
        with CaptureQueriesContext(connection) as queries:
            detail = api.get(reverse("api:sweep-detail", args=[created["id"]])).json()
        assert [run["condor_id"] for run in detail["runs"]] == [""] * runs
        return len(queries)

    assert queries_to_read(2) == queries_to_read(20)


@pytest.mark.parametrize(
    "parameters, field, message",
    [
        ({"grid": {"lr": []}}, "parameters", "lr has no values"),
        ({"grid": {}, "rows": []}, "parameters", "exactly one of"),
        (
            {"random": {"lr": {"kind": "uniform", "low": 0, "high": 1}}, "count": 3},
            "seed",
            "seed must be a whole number",
        ),
        ("not an object", "parameters", "Describe the sweep"),
    ],
)
def test_bad_parameters_are_a_400_naming_the_field(api, fake_bridge, parameters, field, message):
    response = submit(api, parameters)
    assert response.status_code == 400
    error = response.json()["error"]
    assert message in error["fields"][field][0]
    assert not Sweep.objects.exists()


def test_parameters_that_are_not_json_are_a_400(api, fake_bridge):
    response = api.post(
        SWEEPS, {"name": "x", "script": script_upload(), "parameters": "{grid:"}, format="multipart"
    )
    assert response.status_code == 400
    assert "parameters" in response.json()["error"]["fields"]


def test_a_placeholder_without_a_parameter_is_a_400_on_arguments(api, fake_bridge):
    response = submit(api, {"grid": {"lr": [1]}}, arguments=["--epochs", "{epochs}"])
    assert response.status_code == 400
    assert "{epochs} names no parameter" in response.json()["error"]["fields"]["arguments"][0]


def test_a_sweep_over_the_quota_is_a_403_and_nothing_is_accepted(api, student, fake_bridge):
    lab = LabFactory(name="Vision", max_queued_jobs=3)
    MembershipFactory(lab=lab, user=student)
    response = submit(api, {"grid": {"lr": [1, 2, 3, 4]}})
    assert response.status_code == 403
    assert "this sweep of 4 runs would add 4" in response.json()["error"]["message"]
    assert not Job.objects.exists()


def test_another_users_sweep_is_a_404(api, other_student, fake_bridge):
    from tests.conftest import client_with_token

    created = submit(api, {"grid": {"lr": [1]}}).json()
    other = client_with_token(other_student)
    assert other.get(reverse("api:sweep-detail", args=[created["id"]])).status_code == 404
    assert other.get(SWEEPS).json()["results"] == []
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.QUEUED}


def test_the_results_come_as_json_and_csv_compared_by_a_metric(api, student, fake_bridge):
    created = submit(api, {"grid": {"lr": [0.1, 0.01, 0.001]}}).json()
    for run, loss in zip(created["runs"], [0.5, 0.2, None], strict=True):
        if loss is not None:
            job = Job.objects.get(public_id=run["id"])
            (job.directory / ".nightshift" / "metrics.jsonl").write_text(
                json.dumps({"step": 1, "loss": loss}) + "\n"
            )
    results = api.get(reverse("api:sweep-results", args=[created["id"]]), {"sort": "best"}).json()
    assert (results["metric"], results["goal"]) == ("loss", "min")
    assert results["best"]["parameters"] == {"lr": 0.01}
    assert [run["best"] for run in results["runs"]] == [0.2, 0.5, None]
    csv_text = api.get(reverse("api:sweep-results-csv", args=[created["id"]])).content.decode()
    assert csv_text.splitlines()[0] == (
        "index,job_id,lr,state,final_loss,best_loss,best_step,gpu_hours,workstation"
    )
    assert len(csv_text.splitlines()) == 4
