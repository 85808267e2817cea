"""The reproducibility record of every job, and re-running one exactly."""

import hashlib

import pytest
from django.urls import reverse

from experiments import sweeps
from jobs import actions, selectors, specs, submission
from jobs.models import Job
from tests.conftest import client_with_token, script_upload

pytestmark = pytest.mark.django_db

SCRIPT = "import os\nprint(os.environ['NIGHTSHIFT_SEED'])\n"


def submit(user, **spec):
    spec.setdefault("name", "seeded")
    return submission.job_submit(
        user=user, spec=specs.JobSpec(**spec), script=script_upload(SCRIPT)
    )


def test_every_job_records_its_files_hash_and_a_seed(student, fake_bridge):
    job = submit(student)
    assert job.source["sha256"] == {"train.py": hashlib.sha256(SCRIPT.encode()).hexdigest()}
    assert 0 <= job.seed < 2**31


def test_the_submit_description_is_kept_as_sent(student, fake_bridge):
    job = submission.job_submit_to_pool(submit(student).pk)
    sent = fake_bridge.submitted[str(job.public_id)]
    assert job.submit_description.splitlines()[0] == f"universe = {sent['universe']}"
    assert f"environment = {sent['environment']}" in job.submit_description
    assert f"NIGHTSHIFT_SEED='{job.seed}'" in job.submit_description
    assert job.submit_description.endswith("queue\n")


def test_a_reproduction_has_the_same_files_seed_and_submit_description(student, fake_bridge):
    original = submission.job_submit_to_pool(submit(student, arguments=["--lr", "0.1"]).pk)
    again = submission.job_submit_to_pool(actions.job_rerun(job=original, user=student).pk)
    assert again.reproduces == original
    assert again.seed == original.seed
    normalise = selectors.comparable_description
    assert normalise(again) == normalise(original)
    assert again.submit_description != original.submit_description  # its own id and folder
    reproduction = selectors.reproduction_of(again)
    assert reproduction.differences == []
    assert set(reproduction.same) >= {"files (SHA-256)", "seed", "settings", "submit description"}


def test_what_differs_in_a_reproduction_is_named(student, fake_bridge):
    original = submission.job_submit_to_pool(submit(student).pk)
    Job.objects.filter(pk=original.pk).update(workstation="ws-volta", gpu_model="V100")
    again = actions.job_rerun(job=original, user=student)
    Job.objects.filter(pk=again.pk).update(workstation="ws-ampere", gpu_model="A100")
    again.refresh_from_db()
    differences = selectors.reproduction_of(again).differences
    assert ("workstation", "ws-volta", "ws-ampere") in differences
    assert ("GPU model", "V100", "A100") in differences


def test_the_job_page_shows_the_record_and_the_comparison(student_client, student, fake_bridge):
    original = submission.job_submit_to_pool(submit(student).pk)
    again = submission.job_submit_to_pool(actions.job_rerun(job=original, user=student).pk)
    page = student_client.get(reverse("jobs:detail", args=[again.public_id])).content.decode()
    assert "Reproducibility record" in page
    assert f"NIGHTSHIFT_SEED={original.seed}" in page
    assert original.source["sha256"]["train.py"] in page
    assert "Re-runs" in page and "Nothing differs." in page
    assert "Submit description" in page


def test_the_api_returns_the_record(student, fake_bridge):
    job = submission.job_submit_to_pool(submit(student).pk)
    body = client_with_token(student).get(reverse("api:job-detail", args=[job.public_id])).json()
    record = body["reproducibility"]
    assert record["seed"] == job.seed
    assert record["sha256"] == job.source["sha256"]
    assert record["submit_description"] == job.submit_description
    assert record["reproduces"] is None


def test_each_sweep_run_has_its_own_seed_and_description(student, fake_bridge):
    sweep = sweeps.sweep_submit(
        user=student,
        spec=specs.JobSpec(name="s", arguments=["{x}"]),
        plan=sweeps.SweepPlan.from_json({"grid": {"x": [1, 2]}}),
        script=script_upload(),
    )
    sweeps.sweep_submit_to_pool(sweep.pk)
    first, second = sweep.runs.order_by("sweep_index")
    assert first.source["sha256"] == second.source["sha256"]
    assert "'1'" in first.submit_description.split("arguments = ")[1].splitlines()[0]
    assert "'2'" in second.submit_description.split("arguments = ")[1].splitlines()[0]
    again = actions.job_rerun(job=second, user=student)
    assert (again.seed, again.parameters) == (second.seed, {"x": 2})
