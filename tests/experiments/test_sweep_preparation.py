"""A large sweep is accepted at once and its runs written afterwards, a chunk at a time:
checked whole when accepted, its quota held meanwhile, taken up where a killed attempt
stopped, stoppable by cancelling, and sent again if its task is lost."""

import os

import pytest

from accounting.models import QuotaHold
from condor_bridge import JobState as Condor
from experiments import preparation, sweeps
from experiments.models import Sweep
from experiments.selectors import sweep_stage
from jobs import specs, sync
from jobs.models import Job, JobState
from tests.experiments.test_sweeps import submit_sweep
from tests.factories import LabFactory, MembershipFactory

pytestmark = pytest.mark.django_db

# 4 learning rates by 3 batch sizes: 12 runs, written in chunks of 5.
GRID = {"grid": {"lr": [0.1, 0.01, 0.001, 0.0001], "batch": [32, 64, 128]}}


@pytest.fixture
def large(settings, monkeypatch):
    """Sweeps of more than 5 runs are large; runs are written 5 at a time."""
    settings.SWEEP_RUNS_IN_REQUEST = 5
    monkeypatch.setattr(preparation, "PREPARE_CHUNK", 5)


@pytest.fixture
def spooled(settings):
    """The schedd takes the runs' files when they are submitted: their folders are made
    whole before the submit."""
    from jobs.bridge import get_bridge

    settings.CONDOR_FILE_MODE = "spool"
    get_bridge.cache_clear()
    yield get_bridge()
    get_bridge.cache_clear()


def folders(settings) -> set[str]:
    return {entry.name for entry in os.scandir(settings.JOBS_DIR)}


def test_a_large_sweep_is_accepted_before_its_runs_are_written(
    student, fake_bridge, large, settings
):
    sweep = submit_sweep(student, parameters=GRID)
    assert (sweep.planned_runs, sweep.prepared_runs, sweep.runs.count()) == (12, 0, 0)
    assert sweep_stage(sweep) == "writing"
    assert QuotaHold.objects.get().runs == 12
    # Only the first run's folder exists yet, with the files every run shares.
    first = preparation.run_folder(sweep.public_id, 0)
    assert folders(settings) == {first.name}
    assert (first / "train.py").read_text() == "print('hello')\n"


def test_the_worker_writes_every_run_as_a_small_sweep_would_have_them(
    student, fake_bridge, large, settings
):
    sweep = preparation.sweep_prepare(submit_sweep(student, parameters=GRID).pk)
    runs = list(sweep.runs.order_by("sweep_index"))
    assert [run.sweep_index for run in runs] == list(range(12))
    assert [run.request["arguments"] for run in runs][:4] == [
        ["--lr", "0.1", "--batch=32"],
        ["--lr", "0.1", "--batch=64"],
        ["--lr", "0.1", "--batch=128"],
        ["--lr", "0.01", "--batch=32"],
    ]
    assert runs[11].parameters == {"lr": 0.0001, "batch": 128}
    assert {run.state for run in runs} == {JobState.QUEUED}
    assert all(run.events.filter(kind="created").count() == 1 for run in runs)
    assert folders(settings) == {str(run.public_id) for run in runs}
    # The schedd sees these folders: each run's is made empty, and filled once HTCondor has
    # the runs (they wait in its queue meanwhile).
    assert all(not os.listdir(run.directory) for run in runs[1:])
    assert (sweep.prepared_runs, sweep.ready_runs, sweep_stage(sweep)) == (12, 0, "submitting")
    assert not QuotaHold.objects.exists()

    sweep = sweeps.sweep_submit_to_pool(sweep.pk)
    assert sweep.ready_runs == 12
    for run in runs:
        assert (run.directory / "train.py").read_text() == "print('hello')\n"
        assert (run.directory / ".nightshift" / "nightshift.py").is_file()
        assert fake_bridge.job_ad(str(run.public_id))["NightshiftFolderReady"] is True


def test_spooled_runs_have_their_folders_whole_before_their_submit(
    student, fake_bridge, large, spooled
):
    sweep = preparation.sweep_prepare(submit_sweep(student, parameters=GRID).pk)
    assert (sweep.prepared_runs, sweep.ready_runs) == (12, 12)
    for run in sweep.runs.all():
        assert sorted(os.listdir(run.directory)) == [".nightshift", "outputs", "train.py"]
    sweep = sweeps.sweep_submit_to_pool(sweep.pk)
    run = sweep.runs.get(sweep_index=7)
    assert "NightshiftFolderReady" not in spooled.job_ad(str(run.public_id))


def test_runs_wait_in_htcondors_queue_until_their_folders_are_filled(
    student, fake_bridge, large, settings, monkeypatch
):
    sweep = preparation.sweep_prepare(submit_sweep(student, parameters=GRID).pk)
    fill_run_folders = preparation.fill_run_folders
    chunks = []

    def killed_in_the_second_chunk(first, targets, tree, *, again):
        chunks.append(targets)
        if len(chunks) == 2:
            fill_run_folders(first, targets[:2], tree, again=again)  # part done, then gone
            (targets[2] / "outputs").mkdir()
            raise OSError("worker killed")
        fill_run_folders(first, targets, tree, again=again)

    monkeypatch.setattr(preparation, "fill_run_folders", killed_in_the_second_chunk)
    with pytest.raises(OSError, match="worker killed"):
        sweeps.sweep_submit_to_pool(sweep.pk)
    sweep.refresh_from_db()
    assert sweep.is_submitted and sweep.ready_runs == 5
    assert sweep.last_error == (
        "Making its runs' folders stopped at 5 of 12 (OSError); Nightshift tries again."
    )
    runs = list(sweep.runs.order_by("sweep_index"))
    ready = [fake_bridge.job_ad(str(run.public_id))["NightshiftFolderReady"] for run in runs]
    assert ready == [True] * 5 + [False] * 7
    # Submitted for the schedd to make its jobs after taking the cluster, all of them at once.
    assert {fake_bridge.submitted[str(run.public_id)]["max_materialize"] for run in runs} == {"12"}
    fake_bridge.set_state(str(runs[4].public_id), Condor.RUNNING)
    with pytest.raises(AssertionError, match="before its folder was ready"):
        fake_bridge.set_state(str(runs[5].public_id), Condor.RUNNING)
    # What HTCondor wrote in a waiting run's folder stays; what the killed attempt half
    # made is made again.
    (runs[6].directory / "condor.log").write_text("000 (1.6.000) Job submitted\n")

    sent = []
    monkeypatch.setattr("experiments.tasks.submit_sweep.delay", sent.append)
    settings.RESUBMIT_AFTER_S = 0
    sync.jobs_sync()
    assert sent == [sweep.pk]
    monkeypatch.setattr(preparation, "fill_run_folders", fill_run_folders)
    sweep = sweeps.sweep_submit_to_pool(sweep.pk)
    assert (sweep.ready_runs, sweep.last_error, fake_bridge.submit_calls) == (12, "", 1)
    for run in runs[1:]:
        expected = [".nightshift", "outputs", "train.py"] + ["condor.log"] * (run.sweep_index == 6)
        assert sorted(os.listdir(run.directory)) == sorted(expected)
        assert fake_bridge.job_ad(str(run.public_id))["NightshiftFolderReady"] is True
    sent.clear()
    sync.jobs_sync()
    assert sent == []


def test_submitting_a_sweep_being_written_writes_its_runs_first(student, fake_bridge, large):
    sweep = sweeps.sweep_submit_to_pool(submit_sweep(student, parameters=GRID).pk)
    assert fake_bridge.submit_calls == 1
    assert sweep.runs.filter(cluster_id=sweep.cluster_id).count() == 12
    assert sweep_stage(sweep) == "submitted"


def test_the_quota_counts_runs_accepted_but_not_yet_written(student, fake_bridge, large):
    lab = LabFactory(name="Vision", max_queued_jobs=15, max_concurrent_gpus=30)
    MembershipFactory(lab=lab, user=student)
    sweep = submit_sweep(student, parameters=GRID, gpus=2)
    with pytest.raises(specs.QuotaRefusal, match="12 jobs waiting to run, of at most 15"):
        submit_sweep(student, parameters={"grid": {"lr": [1, 2, 3, 4], "batch": [1]}})
    with pytest.raises(specs.QuotaRefusal, match="24 of 30 GPUs"):
        submit_sweep(student, parameters={"grid": {"lr": [1, 2, 3], "batch": [1]}}, gpus=3)
    preparation.sweep_prepare(sweep.pk)
    # Written, the runs count as jobs, and no longer as held.
    with pytest.raises(specs.QuotaRefusal, match="12 jobs waiting to run, of at most 15"):
        submit_sweep(student, parameters={"grid": {"lr": [1, 2, 3, 4], "batch": [1]}})
    assert not QuotaHold.objects.exists()


def test_an_attempt_killed_mid_chunk_is_taken_up_where_it_stopped(
    student, fake_bridge, large, spooled, settings, monkeypatch
):
    sweep = submit_sweep(student, parameters=GRID)
    copy_run_folders = preparation.copy_run_folders
    chunks = []

    def killed_in_the_second_chunk(first, targets, tree):
        chunks.append(targets)
        if len(chunks) == 2:
            copy_run_folders(first, targets[:2], tree)  # part of its folders made, then gone
            raise OSError("worker killed")
        copy_run_folders(first, targets, tree)

    monkeypatch.setattr(preparation, "copy_run_folders", killed_in_the_second_chunk)
    with pytest.raises(OSError, match="worker killed"):
        preparation.sweep_prepare(sweep.pk)
    sweep.refresh_from_db()
    assert (sweep.prepared_runs, sweep.runs.count()) == (5, 5)
    assert sweep.last_error == (
        "Writing its runs stopped at 5 of 12 (OSError); Nightshift tries again."
    )
    assert QuotaHold.objects.get().runs == 7
    monkeypatch.setattr(preparation, "copy_run_folders", copy_run_folders)

    sweep = preparation.sweep_prepare(sweep.pk)
    runs = list(sweep.runs.order_by("sweep_index"))
    assert [run.sweep_index for run in runs] == list(range(12))
    assert sweep.last_error == ""
    # The folders the killed attempt made are the same runs' again, whole: nothing else.
    assert folders(settings) == {str(run.public_id) for run in runs}
    for run in runs:
        assert sorted(os.listdir(run.directory)) == [".nightshift", "outputs", "train.py"]
    assert not QuotaHold.objects.exists()


def test_only_one_process_writes_a_sweep_at_a_time(student, fake_bridge, large):
    sweep = submit_sweep(student, parameters=GRID)
    with preparation.preparing_alone(sweep.pk) as alone:
        assert alone
        # Another connection (another worker) would be told no; this one holds the lock.
        from django.db import connections

        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_try_advisory_lock(%s, %s)", [preparation.LOCK_NAMESPACE, sweep.pk]
                )
                assert cursor.fetchone()[0] is False
        finally:
            other.close()


def test_cancelling_a_sweep_being_written_stops_it_and_lets_its_quota_go(
    student, fake_bridge, large, spooled, monkeypatch
):
    sweep = submit_sweep(student, parameters=GRID)
    monkeypatch.setattr(preparation, "PREPARE_CHUNK", 5)
    chunks = []
    make_folders = preparation.make_folders

    def cancelled_after_the_first_chunk(first, targets, tree):
        chunks.append(targets)
        make_folders(first, targets, tree)
        if len(chunks) == 2:
            sweeps.sweep_cancel(sweep=Sweep.objects.get(pk=sweep.pk), user=student)

    monkeypatch.setattr(preparation, "make_folders", cancelled_after_the_first_chunk)
    sweep = preparation.sweep_prepare(sweep.pk)
    assert (sweep.planned_runs, sweep.prepared_runs) == (5, 5)
    assert set(sweep.runs.values_list("state", flat=True)) == {JobState.REMOVED}
    assert not QuotaHold.objects.exists()
    # The second chunk's folders were no run's, and are gone.
    assert len(os.listdir(sweep.runs.first().directory.parent)) == 5
    assert sweep_stage(sweep) == "stopped"
    sweeps.sweep_submit_to_pool(sweep.pk)
    assert fake_bridge.submit_calls == 0


def test_a_sweep_cancelled_before_any_run_is_written_writes_none(student, fake_bridge, large):
    sweep = submit_sweep(student, parameters=GRID)
    assert sweeps.sweep_cancel(sweep=sweep, user=student) == 12
    sweep = preparation.sweep_prepare(sweep.pk)
    assert (sweep.planned_runs, sweep.runs.count()) == (0, 0)
    assert not QuotaHold.objects.exists()
    with pytest.raises(specs.JobActionError, match="already ended"):
        sweeps.sweep_cancel(sweep=sweep, user=student)


def test_a_sweep_whose_writing_task_was_lost_is_sent_again(
    student, fake_bridge, large, settings, monkeypatch
):
    sent = []
    monkeypatch.setattr("experiments.tasks.submit_sweep.delay", sent.append)
    sweep = submit_sweep(student, parameters=GRID)
    settings.RESUBMIT_AFTER_S = 0
    sync.jobs_sync()
    assert sent == [sweep.pk]


def test_a_run_that_breaks_while_being_written_stops_the_sweep_with_its_reason(
    student, fake_bridge, large, monkeypatch
):
    sweep = submit_sweep(student, parameters=GRID)

    def refused(job, run, *args, **kwargs):
        if job.sweep_index == 7:
            raise specs.JobSubmissionError("arguments", "too long")

    monkeypatch.setattr(preparation, "fill_run", refused)
    sweep = preparation.sweep_prepare(sweep.pk)
    assert (sweep.planned_runs, sweep.prepared_runs) == (5, 5)
    assert sweep.last_error == "Run 7: too long"
    assert not QuotaHold.objects.exists()
    assert Job.objects.filter(sweep=sweep).count() == 5
