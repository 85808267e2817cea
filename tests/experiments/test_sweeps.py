"""Sweeps through their services, against the fake bridge: accepted whole or refused whole,
submitted as one cluster, exactly once."""

import gc
import json
import os

import pytest

from condor_bridge import BridgeError
from experiments import run_folders, sweeps
from experiments.models import Sweep
from jobs import actions, specs, sync
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.factories import LabFactory, MembershipFactory

pytestmark = pytest.mark.django_db

GRID = {"grid": {"lr": [0.1, 0.01, 0.001], "batch": [32, 64]}}


def submit_sweep(user, parameters=GRID, **spec):
    spec.setdefault("name", "lr sweep")
    spec.setdefault("arguments", ["--lr", "{lr}", "--batch={batch}"])
    return sweeps.sweep_submit(
        user=user,
        spec=specs.JobSpec(**spec),
        plan=sweeps.SweepPlan.from_json(parameters),
        script=script_upload(),
    )


def test_a_3_by_2_grid_becomes_6_queued_runs_with_their_own_arguments(student, fake_bridge):
    sweep = submit_sweep(student)
    runs = list(sweep.runs.order_by("sweep_index"))
    assert [run.request["arguments"] for run in runs] == [
        ["--lr", lr, f"--batch={batch}"]
        for lr in ("0.1", "0.01", "0.001")
        for batch in ("32", "64")
    ]
    assert [run.name for run in runs][:2] == ["lr sweep [0]", "lr sweep [1]"]
    assert {run.state for run in runs} == {JobState.QUEUED}
    assert runs[5].parameters == {"lr": 0.001, "batch": 64}
    environment = dict(runs[5].request["environment"])
    assert json.loads(environment["NIGHTSHIFT_PARAMETERS"]) == {"lr": 0.001, "batch": 64}
    for run in runs:
        assert (run.directory / "train.py").read_text() == "print('hello')\n"
        assert (run.directory / ".nightshift" / "nightshift.py").is_file()
    assert len({run.directory for run in runs}) == 6


def test_the_sweep_is_submitted_as_one_cluster_in_one_call(student, fake_bridge):
    sweep = sweeps.sweep_submit_to_pool(submit_sweep(student).pk)
    runs = list(sweep.runs.order_by("sweep_index"))
    assert fake_bridge.submit_calls == 1
    assert {run.cluster_id for run in runs} == {sweep.cluster_id}
    assert [run.proc_id for run in runs] == list(range(6))
    assert {run.state for run in runs} == {JobState.IDLE}
    assert all(run.events.filter(kind="submitted").count() == 1 for run in runs)
    description = fake_bridge.submitted[str(runs[2].public_id)]
    assert description["arguments"] == "\"'train.py' '--lr' '0.01' '--batch=32'\""


def test_a_retried_sweep_submission_adopts_its_cluster(student, fake_bridge):
    sweep = submit_sweep(student)
    sweeps.sweep_submit_to_pool(sweep.pk)
    Sweep.objects.filter(pk=sweep.pk).update(cluster_id=None)
    Job.objects.filter(sweep=sweep).update(cluster_id=None, state=JobState.QUEUED)
    sweep = sweeps.sweep_submit_to_pool(sweep.pk)
    assert fake_bridge.submit_calls == 1
    assert sweep.cluster_id == 1
    assert "found already submitted" in sweep.runs.first().events.last().detail


def test_a_scheduler_that_is_down_leaves_the_runs_waiting_and_the_task_retries(
    student, fake_bridge
):
    sweep = submit_sweep(student)
    fake_bridge.down = True
    with pytest.raises(BridgeError):
        sweeps.sweep_submit_to_pool(sweep.pk)
    assert set(sweep.runs.values_list("state", flat=True)) == {JobState.QUEUED}
    assert "keeps trying" in sweep.runs.first().status_detail
    fake_bridge.down = False
    assert sweeps.sweep_submit_to_pool(sweep.pk).cluster_id is not None


def test_a_placeholder_that_names_no_parameter_is_refused_and_nothing_is_kept(
    student, fake_bridge, settings
):
    with pytest.raises(specs.JobSubmissionError, match=r"\{epochs\} names no parameter"):
        submit_sweep(student, arguments=["--epochs", "{epochs}"])
    assert not Sweep.objects.exists() and not Job.objects.exists()
    assert not any(settings.JOBS_DIR.glob("*-*"))


def test_a_sweep_over_the_run_limit_is_refused(student, fake_bridge, settings):
    settings.MAX_SWEEP_RUNS = 5
    with pytest.raises(specs.JobSubmissionError, match="6 runs; at most 5"):
        submit_sweep(student)


def test_a_value_that_would_break_a_run_refuses_the_whole_sweep(student, fake_bridge):
    with pytest.raises(specs.JobSubmissionError) as refused:
        submit_sweep(
            student,
            parameters={"rows": [{"lr": "0.1"}, {"lr": "a\u0000b"}]},
            arguments=["--lr", "{lr}"],
        )
    assert refused.value.field == "arguments"
    assert not Job.objects.exists()


def test_the_quota_counts_every_run_of_the_sweep_before_any_is_accepted(student, fake_bridge):
    lab = LabFactory(name="Vision", max_queued_jobs=5, max_concurrent_gpus=4)
    MembershipFactory(lab=lab, user=student)
    with pytest.raises(specs.QuotaRefusal, match="this sweep of 6 runs would add 6"):
        submit_sweep(student, gpus=0)
    with pytest.raises(specs.QuotaRefusal, match="this sweep of 4 runs asks for 8 more"):
        submit_sweep(student, parameters={"grid": {"lr": [1, 2], "batch": [1, 2]}}, gpus=2)
    assert not Job.objects.exists()


def test_random_sweeps_are_reproducible_from_their_seed(student, fake_bridge):
    plan = {
        "random": {"lr": {"kind": "log_uniform", "low": 1e-4, "high": 1e-1}},
        "count": 4,
        "seed": 42,
    }
    first = submit_sweep(student, parameters=plan, arguments=["--lr", "{lr}"])
    second = submit_sweep(student, parameters=plan, arguments=["--lr", "{lr}"])
    values = [
        list(s.runs.order_by("sweep_index").values_list("parameters", flat=True))
        for s in (first, second)
    ]
    assert values[0] == values[1]
    assert len({run["lr"] for run in values[0]}) == 4


def test_lost_sweep_submissions_are_sent_again_by_the_reconciler(
    student, fake_bridge, settings, monkeypatch
):
    sent = []
    monkeypatch.setattr("experiments.tasks.submit_sweep.delay", sent.append)
    monkeypatch.setattr("jobs.tasks.submit_job.delay", lambda pk: pytest.fail("sent singly"))
    sweep = submit_sweep(student)
    settings.RESUBMIT_AFTER_S = 0
    Sweep.objects.filter(pk=sweep.pk).update(submit_requested_at=None)
    sync.jobs_sync()
    assert sent[-1] == sweep.pk


def test_cancelling_a_submitted_sweep_removes_its_cluster_in_one_call(student, fake_bridge):
    sweep = sweeps.sweep_submit_to_pool(submit_sweep(student).pk)
    assert sweeps.sweep_cancel(sweep=sweep, user=student) == 6
    sync.jobs_sync()
    runs = list(sweep.runs.all())
    assert {(run.state, run.outcome) for run in runs} == {(JobState.REMOVED, "cancelled")}
    assert len([a for a in fake_bridge.actions if a[0] == "remove"]) == 6  # one per proc
    with pytest.raises(specs.JobActionError, match="already ended"):
        sweeps.sweep_cancel(sweep=sweep, user=student)


def test_cancelling_a_sweep_before_it_reaches_htcondor_ends_its_runs_at_once(student, fake_bridge):
    sweep = submit_sweep(student)
    sweeps.sweep_cancel(sweep=sweep, user=student)
    assert set(sweep.runs.values_list("state", "outcome")) == {(JobState.REMOVED, "cancelled")}
    # The submission task that comes later finds nothing to send.
    sweeps.sweep_submit_to_pool(sweep.pk)
    assert fake_bridge.submit_calls == 0


def test_only_the_owner_or_staff_cancel_a_sweep(student, other_student, fake_bridge):
    sweep = submit_sweep(student)
    with pytest.raises(specs.JobActionError, match="owner"):
        sweeps.sweep_cancel(sweep=sweep, user=other_student)
    assert set(sweep.runs.values_list("state", flat=True)) == {JobState.QUEUED}


def test_a_project_sweep_varies_the_entry_command_and_each_run_keeps_its_own(student, fake_bridge):
    from tests.jobs.test_projects import project

    sweep = sweeps.sweep_submit(
        user=student,
        spec=specs.JobSpec(
            name="matrix",
            entry_command="python eval.py --system {system}",
            arguments=["--data", "{data}"],
        ),
        plan=sweeps.SweepPlan.from_json(
            {"grid": {"system": ["bert", "t5"], "data": ["squad", "glue"]}}
        ),
        script=project({"eval.py": "print(1)", "data/x.csv": "1"}),
    )
    runs = list(sweep.runs.order_by("sweep_index"))
    assert [run.request["arguments"] for run in runs] == [
        ["--system", system, "--data", data]
        for system in ("bert", "t5")
        for data in ("squad", "glue")
    ]
    assert all((run.directory / "data" / "x.csv").read_text() == "1" for run in runs)
    archives = {(run.directory / ".source" / "project.zip").stat().st_ino for run in runs}
    assert len(archives) == 1  # the kept archive is linked, not copied
    spec = specs.job_spec_of(runs[3])
    assert spec.entry_command == "python eval.py --system t5"
    assert spec.arguments == ["--data", "glue"]


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving folders to the jobs' account")


@needs_root
def test_where_jobs_run_as_another_account_the_runs_share_the_portals_script(
    student, fake_bridge, settings
):
    settings.JOB_DIR_UID = 2000
    runs = list(submit_sweep(student).runs.all())

    scripts = {os.stat(run.directory / "train.py") for run in runs}
    assert len({(s.st_dev, s.st_ino) for s in scripts}) == 1
    [script] = scripts
    assert script.st_uid == os.geteuid() and not script.st_mode & 0o022  # no job can write it
    assert all(os.stat(run.directory).st_uid == 2000 for run in runs)
    assert all(os.stat(run.directory / "outputs").st_uid == 2000 for run in runs)


def test_where_jobs_run_as_the_portals_account_each_run_has_its_own_script(
    student, fake_bridge, settings
):
    assert settings.JOB_DIR_UID is None
    runs = list(submit_sweep(student).runs.all())

    assert len({os.stat(run.directory / "train.py").st_ino for run in runs}) == len(runs)
    assert {(run.directory / "train.py").read_text() for run in runs} == {"print('hello')\n"}


@needs_root
def test_a_projects_files_given_to_the_jobs_account_are_copied_for_each_run(
    student, fake_bridge, settings
):
    from tests.jobs.test_projects import project

    settings.JOB_DIR_UID = 2000
    sweep = sweeps.sweep_submit(
        user=student,
        spec=specs.JobSpec(name="p", entry_command="python eval.py {n}"),
        plan=sweeps.SweepPlan.from_json({"grid": {"n": [1, 2, 3]}}),
        script=project({"eval.py": "print(1)", "data/x.csv": "1"}),
    )
    runs = list(sweep.runs.all())

    for name in ("eval.py", "data/x.csv"):
        assert len({os.stat(run.directory / name).st_ino for run in runs}) == 3
    for name in ("eval.py", "data/x.csv", "data"):  # as the first run's: the jobs may write
        assert {os.stat(run.directory / name).st_uid for run in runs} == {2000}
    assert len({os.stat(run.directory / ".source" / "project.zip").st_ino for run in runs}) == 1


def test_a_file_others_may_write_is_never_shared(tmp_path, settings):
    settings.JOB_DIR_UID = os.geteuid() + 1
    script = tmp_path / "train.py"
    script.write_text("print(1)")
    script.chmod(0o644)
    assert run_folders.jobs_cannot_write(script)
    script.chmod(0o664)
    assert not run_folders.jobs_cannot_write(script)
    settings.JOB_DIR_UID = None
    script.chmod(0o644)
    assert not run_folders.jobs_cannot_write(script)


def test_a_run_refused_while_the_folders_are_being_made_leaves_no_folder_behind(
    student, fake_bridge, settings
):
    from tests.jobs.test_projects import project

    rows = [{"script": "eval.py"}] * 600 + [{"script": "other.py"}]
    with pytest.raises(specs.JobSubmissionError, match="not the script it starts"):
        sweeps.sweep_submit(
            user=student,
            spec=specs.JobSpec(name="m", entry_command="python {script}"),
            plan=sweeps.SweepPlan.from_json({"rows": rows}),
            script=project({"eval.py": "print(1)", "other.py": "print(2)"}),
        )
    assert not Sweep.objects.exists() and not Job.objects.exists()
    assert not any(settings.JOBS_DIR.glob("*-*"))


def test_re_running_a_sweep_run_keeps_its_parameters(student, fake_bridge):
    run = submit_sweep(student).runs.get(sweep_index=4)
    again = actions.job_rerun(job=run, user=student)
    assert again.sweep is None
    assert again.parameters == {"lr": 0.001, "batch": 32}
    assert again.request["arguments"] == run.request["arguments"]
    assert dict(again.request["environment"])["NIGHTSHIFT_PARAMETERS"] == json.dumps(run.parameters)
    assert "NIGHTSHIFT_PARAMETERS" not in specs.job_spec_of(run).environment


def test_accepting_and_submitting_a_large_sweep_start_no_collection(
    student, fake_bridge, collections
):
    grid = {"grid": {"lr": [10**-n for n in range(1, 11)], "batch": list(range(20))}}
    spec = specs.JobSpec(name="large", arguments=["--lr", "{lr}", "--batch={batch}"])
    plan, script = sweeps.SweepPlan.from_json(grid), script_upload()
    # Counting from an empty young generation: the few objects made on the way in start none.
    gc.collect()
    collections.clear()
    sweep = sweeps.sweep_submit(user=student, spec=spec, plan=plan, script=script)
    # Counted without making an object: the first one made after a pause starts a collection.
    while_accepting = len(collections)
    gc.collect()
    collections.clear()
    sweeps.sweep_submit_to_pool(sweep.pk)
    while_submitting = len(collections)
    assert sweep.runs.filter(cluster_id__isnull=False).count() == 200
    assert (while_accepting, while_submitting) == (0, 0)
