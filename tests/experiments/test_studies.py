"""Hyperparameter studies through their services, against the fake bridge: Optuna asks,
Nightshift runs the trials as jobs, and what they log goes back to Optuna."""

import json

import optuna
import pytest

from condor_bridge import JobState as Condor
from experiments import studies
from jobs import specs, submission, sync
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.factories import LabFactory, MembershipFactory

pytestmark = pytest.mark.django_db(transaction=True)

SPACE = {"x": {"kind": "uniform", "low": -5, "high": 5}}


@pytest.fixture(autouse=True)
def _steps_by_hand(monkeypatch):
    """Each test advances its study itself, instead of beat and the task queue."""
    monkeypatch.setattr(studies, "_enqueue_advance", lambda sweep_pk: None)


def start(user, **plan):
    plan = {"space": SPACE, "objective": "loss", "parallel": 2, "max_trials": 5, "seed": 7, **plan}
    return studies.study_submit(
        user=user,
        spec=specs.JobSpec(name="search", arguments=["--x", "{x}"]),
        plan=studies.StudyPlan.from_json(plan),
        script=script_upload(),
    )


def finish(fake_bridge, job, losses, state=Condor.COMPLETED, exit_code=0):
    """The trial ran on the (fake) pool and logged these losses, one per step."""
    metrics = job.directory / ".nightshift" / "metrics.jsonl"
    metrics.write_text(
        "".join(json.dumps({"step": s, "loss": v}) + "\n" for s, v in enumerate(losses))
    )
    if state is not None:
        fake_bridge.set_state(str(job.public_id), Condor.RUNNING)
        fake_bridge.set_state(str(job.public_id), state, exit_code=exit_code)


def submitted(sweep):
    for job in sweep.runs.filter(cluster_id__isnull=True):
        submission.job_submit_to_pool(job.pk)
    return list(sweep.runs.order_by("sweep_index"))


def test_a_study_runs_p_trials_at_once_with_optunas_values(student, fake_bridge):
    sweep = start(student)
    report = studies.study_advance(sweep.pk)
    assert report.started == 2
    trials = submitted(sweep)
    assert [t.sweep_index for t in trials] == [0, 1]
    for trial in trials:
        assert -5 <= trial.parameters["x"] <= 5
        assert trial.request["arguments"] == ["--x", repr(trial.parameters["x"])]
    assert studies.study_advance(sweep.pk).started == 0  # still two unfinished


def test_finished_trials_are_told_to_optuna_and_new_ones_started(student, fake_bridge):
    sweep = start(student)
    studies.study_advance(sweep.pk)
    first, second = submitted(sweep)
    finish(fake_bridge, first, [3.0, 2.0])
    finish(fake_bridge, second, [1.0], state=Condor.COMPLETED, exit_code=1)
    sync.jobs_sync()
    report = studies.study_advance(sweep.pk)
    assert (report.told, report.started) == (2, 2)
    study = optuna.load_study(
        study_name=f"nightshift-{sweep.public_id}", storage=studies.optuna_storage()
    )
    states = {t.number: (t.state, t.value) for t in study.trials}
    assert states[0] == (optuna.trial.TrialState.COMPLETE, 2.0)
    assert states[1][0] == optuna.trial.TrialState.FAIL  # it exited with 1


def test_the_study_stops_at_its_number_of_trials(student, fake_bridge):
    sweep = start(student, max_trials=3, parallel=3)
    studies.study_advance(sweep.pk)
    for job in submitted(sweep):
        finish(fake_bridge, job, [1.0])
    sync.jobs_sync()
    report = studies.study_advance(sweep.pk)
    sweep.refresh_from_db()
    assert report.started == 0 and report.finished
    assert sweep.stop_reason == "reached 3 trials" and sweep.finished_at is not None
    assert Job.objects.filter(sweep=sweep).count() == 3


def test_a_trial_worse_than_the_others_is_asked_to_stop_then_removed(
    student, fake_bridge, monkeypatch
):
    sweep = start(student, max_trials=4, parallel=4, pruner="median", prune_grace_s=0)
    studies.study_advance(sweep.pk)
    good_a, good_b, bad, _ = submitted(sweep)
    finish(fake_bridge, good_a, [1.0, 0.5, 0.2])
    finish(fake_bridge, good_b, [1.1, 0.6, 0.3])
    sync.jobs_sync()
    studies.study_advance(sweep.pk)  # the two good ones are told
    fake_bridge.set_state(str(bad.public_id), Condor.RUNNING)
    sync.jobs_sync()
    finish(fake_bridge, bad, [5.0, 4.8, 4.9], state=None)  # still running, far worse
    assert studies.study_advance(sweep.pk).pruned == 1
    assert (bad.directory / ".nightshift" / "control" / "stop").is_file()
    assert bad.events.filter(kind="prune requested").exists()
    studies.study_advance(sweep.pk)  # the grace (0 s here) is over: removed
    sync.jobs_sync()
    bad.refresh_from_db()
    assert bad.state == JobState.REMOVED
    studies.study_advance(sweep.pk)
    study = optuna.load_study(
        study_name=f"nightshift-{sweep.public_id}", storage=studies.optuna_storage()
    )
    assert study.trials[bad.sweep_index].state == optuna.trial.TrialState.PRUNED


def test_a_gpu_hour_budget_stops_the_study_and_its_running_trials(student, fake_bridge):
    sweep = start(student, gpu_hours=0.0001)
    studies.study_advance(sweep.pk)
    first, second = submitted(sweep)
    from django.utils import timezone

    from accounting.models import UsageRecord

    UsageRecord.objects.create(
        job=first,
        user=student,
        started_at=timezone.now(),
        ended_at=timezone.now(),
        wall_s=3600,
        gpus=1,
    )
    studies.study_advance(sweep.pk)
    sweep.refresh_from_db()
    assert sweep.stop_reason == "used its budget of 0.0001 GPU-hours"
    assert ("remove", first.cluster_id, 0, "Its study used its budget of 0.0001 GPU-hours") in [
        (a, c, p, r) for a, c, p, r in fake_bridge.actions
    ]


@pytest.mark.parametrize(
    "plan, field",
    [
        ({"space": {}}, "space"),
        ({"space": {"x": {"kind": "gauss"}}}, "space"),
        ({"objective": "val loss"}, "objective"),
        ({"direction": "down"}, "direction"),
        ({"sampler": "cmaes"}, "sampler"),
        ({"parallel": 0}, "parallel"),
        ({"max_trials": 10**9}, "max_trials"),
        ({"gpu_hours": -1}, "gpu_hours"),
        ({"nonsense": 1}, "study"),
    ],
)
def test_a_bad_study_is_refused_naming_the_field(student, fake_bridge, plan, field):
    with pytest.raises(specs.JobSubmissionError) as refused:
        start(student, **plan)
    assert refused.value.field == field


def test_the_quota_counts_the_trials_that_run_at_once(student, fake_bridge):
    lab = LabFactory(name="Vision", max_queued_jobs=3)
    MembershipFactory(lab=lab, user=student)
    with pytest.raises(specs.QuotaRefusal, match="sweep of 4 runs"):
        start(student, parallel=4)


def test_the_api_starts_a_study_and_the_page_follows_it(student, student_client, fake_bridge):
    from django.urls import reverse

    from tests.conftest import client_with_token

    api = client_with_token(student)
    response = api.post(
        reverse("api:sweep-study"),
        {
            "name": "search",
            "gpus": 0,
            "script": script_upload(),
            "arguments": ["{x}"],
            "study": json.dumps(
                {"space": SPACE, "objective": "loss", "parallel": 2, "max_trials": 4}
            ),
        },
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["kind"] == "study" and body["stop_reason"] == ""
    sweep_id = body["id"]
    from experiments.models import Sweep

    sweep = Sweep.objects.get(public_id=sweep_id)
    studies.study_advance(sweep.pk)
    page = student_client.get(reverse("jobs:sweep", args=[sweep_id])).content.decode()
    assert "Optuna study: minimise <strong>loss</strong> with the TPE sampler" in page
    assert "2 of at most 4 trials, 2 at a time" in page
    assert "Stop the study" in page
    stopped = api.post(reverse("api:sweep-cancel", args=[sweep_id]))
    assert stopped.status_code == 200
    sweep.refresh_from_db()
    assert sweep.stop_reason == "was stopped by student"
    assert api.post(reverse("api:sweep-cancel", args=[sweep_id])).status_code == 409


def test_the_api_explains_a_bad_study(student, fake_bridge):
    from django.urls import reverse

    from tests.conftest import client_with_token

    response = client_with_token(student).post(
        reverse("api:sweep-study"),
        {
            "name": "search",
            "script": script_upload(),
            "arguments": ["{y}"],
            "study": json.dumps({"space": SPACE, "objective": "loss"}),
        },
        format="multipart",
    )
    assert response.status_code == 400
    assert "{y} names no parameter" in response.json()["error"]["fields"]["arguments"][0]


def test_a_full_quota_holds_new_trials_back_until_it_has_room(student, fake_bridge):
    lab = LabFactory(name="Vision", max_queued_jobs=2)
    MembershipFactory(lab=lab, user=student)
    sweep = start(student, parallel=2, max_trials=5)
    studies.study_advance(sweep.pk)
    assert sweep.runs.count() == 2
    first, second = submitted(sweep)
    finish(fake_bridge, first, [1.0])
    sync.jobs_sync()
    first.refresh_from_db()
    assert first.state == JobState.COMPLETED, (first.state, first.status_detail)
    # One trial ended, and another job of the student's took its place in the quota.
    submission.job_submit(user=student, spec=specs.JobSpec(name="other"), script=script_upload())
    report = studies.study_advance(sweep.pk)
    assert report.told == 1, report  # the step ran (the study's row was not locked elsewhere)
    sweep.refresh_from_db()
    assert sweep.runs.count() == 2
    assert sweep.last_error.startswith("Waiting for quota:")


def test_a_seeded_study_never_asks_twice_for_the_same_values(student, fake_bridge):
    sweep = start(student, parallel=1, max_trials=4, sampler="random")
    for _ in range(4):
        studies.study_advance(sweep.pk)
        for job in submitted(sweep):
            if job.state != JobState.COMPLETED:
                finish(fake_bridge, job, [1.0])
        sync.jobs_sync()
    values = [job.parameters["x"] for job in sweep.runs.all()]
    assert len(values) == 4 and len(set(values)) == 4


def test_a_projects_entry_command_takes_each_trials_values(student, fake_bridge):
    from tests.jobs.test_projects import project

    sweep = studies.study_submit(
        user=student,
        spec=specs.JobSpec(name="proj", entry_command="python train.py --x {x}"),
        plan=studies.StudyPlan.from_json(
            {"space": SPACE, "objective": "loss", "parallel": 2, "max_trials": 2, "seed": 1}
        ),
        script=project({"train.py": "print(1)"}),
    )
    studies.study_advance(sweep.pk)
    for trial in sweep.runs.all():
        assert trial.request["arguments"] == ["--x", repr(trial.parameters["x"])]
        assert (trial.directory / "train.py").read_text() == "print(1)"
        assert (
            specs.job_spec_of(trial).entry_command
            == f"python train.py --x {trial.parameters['x']!r}"
        )
