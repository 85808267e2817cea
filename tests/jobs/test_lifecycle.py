"""The job services against the fake bridge: submit, sync, cancel, collect."""

from datetime import timedelta

import pytest
from django.utils import timezone

from condor_bridge import BridgeError
from condor_bridge import JobState as CondorState
from jobs import actions, specs, staging, submission, sync
from jobs.bridge import get_bridge
from jobs.models import Job, JobState
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db


def submit(user, **spec):
    spec.setdefault("name", "first job")
    return submission.job_submit(user=user, spec=specs.JobSpec(**spec), script=script_upload())


def test_submitting_stores_the_script_and_queues_the_job(student, fake_bridge):
    job = submit(student, arguments=["--epochs", "2"], gpus=1)
    assert job.state == JobState.QUEUED
    assert (job.directory / "train.py").read_text() == "print('hello')\n"
    assert (job.directory / "outputs").is_dir()
    assert job.request["arguments"] == ["--epochs", "2"]
    assert list(job.events.values_list("kind", flat=True)) == ["created"]


def test_the_submission_is_enqueued_only_once_the_transaction_commits(
    student, fake_bridge, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr("jobs.tasks.submit_job.delay", sent.append)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = submit(student)
    assert sent == []
    for callback in callbacks:
        callback()
    assert sent == [job.pk]


def test_submit_to_pool_records_the_cluster(student, fake_bridge):
    job = submission.job_submit_to_pool(submit(student).pk)
    assert job.state == JobState.IDLE
    assert job.cluster_id == 1
    assert fake_bridge.submitted[str(job.public_id)]["initialdir"] == job.output_dir


def test_a_retried_submission_adopts_the_job_instead_of_submitting_twice(student, fake_bridge):
    job = submit(student)
    submission.job_submit_to_pool(job.pk)
    Job.objects.filter(pk=job.pk).update(cluster_id=None, state=JobState.QUEUED)
    job = submission.job_submit_to_pool(job.pk)
    assert fake_bridge.submit_calls == 1
    assert job.cluster_id == 1
    assert "found already submitted" in job.events.last().detail


def test_a_transient_failure_keeps_the_job_queued_and_raises_for_retry(student, fake_bridge):
    job = submit(student)
    fake_bridge.down = True
    with pytest.raises(BridgeError):
        submission.job_submit_to_pool(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.QUEUED
    assert job.submit_attempts == 1
    assert "not answering" in job.status_detail


def test_sync_follows_a_job_to_completion_and_records_the_timeline(student, fake_bridge):
    job = submission.job_submit_to_pool(submit(student).pk)
    job_id = str(job.public_id)
    fake_bridge.set_state(job_id, CondorState.RUNNING, workstation="ws-volta")
    sync.jobs_sync()
    job.refresh_from_db()
    assert (job.state, job.workstation, job.num_starts) == (JobState.RUNNING, "ws-volta", 1)
    fake_bridge.set_state(job_id, CondorState.COMPLETED, exit_code=0)
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.state == JobState.COMPLETED
    assert job.finished_at is not None
    kinds = list(job.events.values_list("kind", flat=True))
    assert kinds == ["created", "submitted", "started", "completed"]


def test_a_nonzero_exit_is_a_failure_with_its_code(student, fake_bridge):
    job = submission.job_submit_to_pool(submit(student).pk)
    fake_bridge.set_state(str(job.public_id), CondorState.COMPLETED, exit_code=3)
    sync.jobs_sync()
    job.refresh_from_db()
    assert (job.state, job.exit_code) == (JobState.FAILED, 3)
    assert job.events.last().detail == "Exited with code 3."


def test_a_hold_reason_is_surfaced(student, fake_bridge):
    job = submission.job_submit_to_pool(submit(student).pk)
    fake_bridge.set_state(str(job.public_id), CondorState.HELD, hold_reason="Disk quota exceeded")
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.state == JobState.HELD
    assert job.hold_reason == "Disk quota exceeded"
    assert job.events.last().detail == "Disk quota exceeded"


def test_an_eviction_shows_as_idle_again_with_the_start_count_kept(student, fake_bridge):
    job = submission.job_submit_to_pool(submit(student).pk)
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING)
    sync.jobs_sync()
    fake_bridge.set_state(str(job.public_id), CondorState.IDLE)
    sync.jobs_sync()
    job.refresh_from_db()
    assert (job.state, job.num_starts) == (JobState.IDLE, 1)
    assert job.events.last().kind == "evicted"


def test_sync_twice_with_nothing_new_writes_nothing(student, fake_bridge):
    job = submission.job_submit_to_pool(submit(student).pk)
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING)
    assert sync.jobs_sync().changed == 1
    assert sync.jobs_sync().changed == 0
    assert job.events.count() == 3


def test_a_request_no_workstation_can_run_is_refused_naming_the_field(student, fake_bridge):
    with pytest.raises(specs.JobSubmissionError) as error:
        submit(student, gpus=1, gpu_memory_gb=80)
    assert error.value.field == "gpu_memory_gb"
    assert "the largest GPU in the pool has 46.5 GB" in error.value.message
    assert not Job.objects.exists()


def test_an_idle_job_no_workstation_can_run_any_more_is_explained(student, fake_bridge):
    # Accepted while a big enough workstation was in the pool; it has left since.
    job = submission.job_submit(
        user=student,
        spec=specs.JobSpec(name="big", gpus=1, gpu_memory_gb=80),
        script=script_upload(),
        check_pool=False,
    )
    job = submission.job_submit_to_pool(job.pk)
    sync.jobs_sync()
    job.refresh_from_db()
    assert "at least 80 GB" in job.match_problem


def test_cancel_removes_the_job_in_htcondor_and_audits_who_did_it(student, fake_bridge):
    job = submission.job_submit_to_pool(submit(student).pk)
    actions.job_cancel(job=job, user=student)
    assert fake_bridge.actions[0][:3] == ("remove", job.cluster_id, 0)
    event = job.events.last()
    assert (event.kind, event.actor) == ("cancel requested", student)
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.state == JobState.REMOVED


def test_cancel_before_submission_never_reaches_htcondor(student, fake_bridge):
    job = submit(student)
    job = actions.job_cancel(job=job, user=student)
    assert job.state == JobState.REMOVED
    assert submission.job_submit_to_pool(job.pk).cluster_id is None
    assert fake_bridge.submit_calls == 0


def test_cancelling_a_finished_job_is_refused(student, fake_bridge):
    job = actions.job_cancel(job=submit(student), user=student)
    with pytest.raises(specs.JobActionError, match="already ended"):
        actions.job_cancel(job=job, user=student)


def test_a_queued_job_whose_task_was_lost_is_sent_again(
    student, fake_bridge, monkeypatch, settings
):
    sent = []
    monkeypatch.setattr("jobs.tasks.submit_job.delay", sent.append)
    settings.RESUBMIT_AFTER_S = 0
    job = submit(student)
    sync.jobs_sync()
    assert job.pk in sent


def test_a_job_whose_submission_keeps_retrying_is_not_sent_again_on_every_tick(
    student, fake_bridge, monkeypatch, settings
):
    """The schedd is down: the task retries, and the reconciler leaves it alone; once the
    task has been silent for RESUBMIT_AFTER_S, the job is sent again, once per silence."""
    sent = []
    monkeypatch.setattr("jobs.tasks.submit_job.delay", sent.append)
    settings.RESUBMIT_AFTER_S = 120
    job = submit(student)
    fake_bridge.down = True
    with pytest.raises(BridgeError):
        submission.job_submit_to_pool(job.pk)  # an attempt: the task is alive
    fake_bridge.down = False  # the schedd's queue answers again; this job's retry is pending
    Job.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(hours=1))
    for _ in range(3):
        sync.jobs_sync()
    assert sent == []
    Job.objects.filter(pk=job.pk).update(
        submit_requested_at=timezone.now() - timedelta(seconds=121)
    )
    for _ in range(3):
        sync.jobs_sync()
    assert sent == [job.pk]


@pytest.mark.parametrize(
    "uploaded, stored",
    [
        ("train.py", "train.py"),
        ("../../etc/passwd.py", "passwd.py"),
        ("my model (v2).py", "my_model_v2.py"),
        ("$(HOME).py", "HOME.py"),
        ("C:\\Users\\me\\x.py", "x.py"),
        ("...py", "train.py"),
    ],
)
def test_uploaded_script_names_become_safe_file_names(uploaded, stored):
    assert staging.safe_script_name(uploaded) == stored


def test_a_non_python_upload_is_refused_naming_the_script_field(student, fake_bridge):
    with pytest.raises(specs.JobSubmissionError) as error:
        submission.job_submit(
            user=student, spec=specs.JobSpec(name="x"), script=script_upload(name="run.sh")
        )
    assert error.value.field == "script"
    assert not Job.objects.exists()


def test_an_invalid_argument_is_refused_before_anything_is_stored(student, fake_bridge):
    with pytest.raises(specs.JobSubmissionError) as error:
        submit(student, arguments=["ok", "bad\nqueue 10"])
    assert error.value.field == "arguments"
    assert not Job.objects.exists()
    assert not any(fake_bridge.submitted)


def test_a_first_attempt_skips_the_lookup_and_a_later_attempt_does_it(
    student, fake_bridge, monkeypatch
):
    lookups = []
    real_find = fake_bridge.find
    monkeypatch.setattr(
        fake_bridge, "find", lambda job_id, **kw: lookups.append(job_id) or real_find(job_id, **kw)
    )
    job = submission.job_submit_to_pool(submit(student).pk)
    assert lookups == []
    Job.objects.filter(pk=job.pk).update(cluster_id=None, state=JobState.QUEUED)
    submission.job_submit_to_pool(job.pk)
    assert lookups == [str(job.public_id)]
    assert fake_bridge.submit_calls == 1


def test_a_job_held_for_memory_carries_a_plain_explanation(student, fake_bridge):
    job = submission.job_submit_to_pool(submit(student).pk)
    fake_bridge.set_state(
        str(job.public_id),
        CondorState.HELD,
        hold_reason="Job has gone over memory limit",
        hold_reason_code=34,
        hold_reason_subcode=102,
    )
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.hold_explanation.title == "It used more memory than it asked for."


def test_an_idle_job_whose_workstations_are_busy_says_so(student, fake_bridge):
    import dataclasses

    fake_bridge.machines = [
        dataclasses.replace(m, state="Claimed", free_cpus=0, free_gpus=0)
        for m in fake_bridge.machines
    ]
    job = submission.job_submit_to_pool(submit(student, gpus=2).pk)
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.match_problem == ""
    assert job.wait_reason == "1 matching workstation (ws-volta), busy right now."
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING)
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.wait_reason == ""


@pytest.mark.parametrize(
    ("uploaded", "name"),
    [
        ("train.py", "train.py"),
        ("C:\\Users\\ada\\resnet project.zip", "resnet project.zip"),
        ("bad\nname\tqueue 9.py", "bad name queue 9.py"),
        ("x" * 300 + ".py", "x" * 200),
    ],
)
def test_a_job_without_a_name_is_named_after_its_file_as_plain_text(uploaded, name):
    assert specs.job_default_name(uploaded_name=uploaded) == name


@pytest.fixture
def stall_clock(settings, monkeypatch):
    """A pool counted as not matching after 60 s, and the sync's clock in the test's hand."""
    from django.core.cache import cache

    cache.delete(sync.FREE_MATCH_SINCE_KEY)
    settings.POOL_STALL_AFTER_S = 60
    clock = [1_000_000.0]
    monkeypatch.setattr(sync.time, "time", lambda: clock[0])
    return clock


def test_a_job_waiting_beside_a_free_workstation_too_long_says_the_pool_is_not_matching(
    student, fake_bridge, stall_clock
):
    clock = stall_clock
    job = submission.job_submit_to_pool(submit(student, gpus=1).pk)
    sync.jobs_sync()
    job.refresh_from_db()
    assert (job.state, job.wait_reason) == (JobState.IDLE, "")
    clock[0] += 59
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.wait_reason == ""
    clock[0] += 2
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.wait_reason == sync.POOL_STALLED_REASON


def test_the_wait_before_the_pool_counts_as_not_matching_restarts_when_nothing_is_free(
    student, fake_bridge, stall_clock
):
    import dataclasses

    clock = stall_clock
    free = fake_bridge.machines
    job = submission.job_submit_to_pool(submit(student, gpus=1).pk)
    sync.jobs_sync()
    clock[0] += 50
    fake_bridge.machines = [
        dataclasses.replace(m, state="Claimed", free_cpus=0, free_gpus=0) for m in free
    ]
    sync.jobs_sync()
    fake_bridge.machines = free
    clock[0] += 50
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.wait_reason == ""


def test_hold_and_release_go_through_htcondor_and_are_audited(student, fake_bridge):
    job = submission.job_submit_to_pool(submit(student).pk)
    actions.job_hold(job=job, user=student)
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.state == JobState.HELD
    assert job.hold_explanation.title == "Someone put it on hold."
    actions.job_release(job=job, user=student)
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.state == JobState.IDLE
    kinds = list(job.events.filter(actor=student).values_list("kind", flat=True))
    assert kinds == ["created", "hold requested", "release requested"]
    assert [a[0] for a in fake_bridge.actions] == ["hold", "release"]


def test_releasing_a_job_that_is_not_held_is_refused(student, fake_bridge):
    job = submission.job_submit_to_pool(submit(student).pk)
    with pytest.raises(specs.JobActionError, match="Only a held job"):
        actions.job_release(job=job, user=student)


def test_a_rerun_is_a_new_job_with_the_same_script_and_settings(student, fake_bridge):
    original = submit(student, arguments=["--lr", "0.1"], gpus=2, max_runtime_s=600)
    (original.directory / "train.py").write_text("print('v1')\n")
    rerun = actions.job_rerun(job=original, user=student)
    assert rerun.pk != original.pk
    assert rerun.name == "first job (re-run)"
    assert (rerun.directory / "train.py").read_text() == "print('v1')\n"
    for key in ("arguments", "gpus", "max_runtime_s", "script_name"):
        assert rerun.request[key] == original.request[key]
    assert "Copied train.py" in rerun.events.get().detail


def test_nobody_can_copy_another_users_job(student, other_student, fake_bridge):
    original = submit(student)
    with pytest.raises(specs.JobSubmissionError, match="not yours"):
        actions.job_rerun(job=original, user=other_student)


def test_a_job_that_runs_again_after_an_eviction_is_shown_as_resumed(student, fake_bridge):
    job = submission.job_submit_to_pool(submit(student).pk)
    job_id = str(job.public_id)
    fake_bridge.set_state(job_id, CondorState.RUNNING, workstation="ws-fermi")
    sync.jobs_sync()
    fake_bridge.set_state(job_id, CondorState.IDLE)
    sync.jobs_sync()
    fake_bridge.set_state(job_id, CondorState.RUNNING, workstation="ws-volta")
    sync.jobs_sync()
    kinds = list(job.events.values_list("kind", flat=True))
    assert kinds[-3:] == ["started", "evicted", "resumed"]
    assert job.events.last().detail == "Running on ws-volta"


def test_an_eviction_names_the_workstation_and_whether_a_checkpoint_will_resume_it(
    student, fake_bridge
):
    job = submission.job_submit_to_pool(submit(student, gpus=1).pk)
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING, workstation="ws-volta")
    sync.jobs_sync()
    fake_bridge.set_state(str(job.public_id), CondorState.IDLE)
    sync.jobs_sync()
    first = job.events.filter(kind="evicted").last().detail
    assert first.startswith("ws-volta was reclaimed by its owner")
    assert "start again from the beginning" in first

    checkpoint = job.directory / ".nightshift" / "checkpoint"
    checkpoint.mkdir(parents=True)
    (checkpoint / "state.json").write_text("{}")
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING, workstation="ws-ampere")
    sync.jobs_sync()
    fake_bridge.set_state(str(job.public_id), CondorState.IDLE)
    sync.jobs_sync()
    second = job.events.filter(kind="evicted").last().detail
    assert second.startswith("ws-ampere was reclaimed") and "resume from its checkpoint" in second


def evict(fake_bridge, job, times, *, checkpoint_each_run=False):
    """Run the job `times` times for 50 s each, evicting it each time (dated an hour ago)."""
    base = timezone.now() - timedelta(hours=1) + timedelta(minutes=job.starts * 2)
    for run in range(times):
        start = base + timedelta(seconds=100 * run)
        fake_bridge.set_state(str(job.public_id), CondorState.RUNNING, at=start)
        sync.jobs_sync()
        if checkpoint_each_run:
            log = job.directory / ".nightshift" / "checkpoints.jsonl"
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a") as stream:
                stream.write(f'{{"time": {(start + timedelta(seconds=20)).timestamp()}}}\n')
        fake_bridge.set_state(
            str(job.public_id), CondorState.IDLE, at=start + timedelta(seconds=50)
        )
        sync.jobs_sync()
        job.refresh_from_db()


def test_a_job_evicted_again_and_again_without_a_checkpoint_is_held_and_told_why(
    student, fake_bridge, settings
):
    settings.MAX_EVICTIONS_WITHOUT_PROGRESS = 2
    job = submission.job_submit_to_pool(submit(student, gpus=1).pk)
    evict(fake_bridge, job, 1)
    assert fake_bridge.actions == []
    evict(fake_bridge, job, 1)
    assert fake_bridge.actions[-1][0] == "hold"
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.state == JobState.HELD
    assert "without saving a checkpoint" in job.hold_explanation.title
    assert job.events.filter(kind="hold requested", actor=None).exists()


def test_a_job_that_checkpoints_is_never_held_for_its_evictions(student, fake_bridge, settings):
    settings.MAX_EVICTIONS_WITHOUT_PROGRESS = 2
    job = submission.job_submit_to_pool(submit(student, gpus=1).pk)
    evict(fake_bridge, job, 3, checkpoint_each_run=True)
    assert [action for action, *_ in fake_bridge.actions] == []


def test_in_spool_mode_the_portal_leaves_the_guard_to_htcondor(student, fake_bridge, settings):
    settings.MAX_EVICTIONS_WITHOUT_PROGRESS = 2
    settings.CONDOR_FILE_MODE = "spool"
    spooling = get_bridge()  # the settings' bridge now: a fake in spool mode
    assert spooling is not fake_bridge
    job = submission.job_submit_to_pool(submit(student, gpus=1).pk)
    evict(spooling, job, 3)
    assert spooling.actions == []


def test_a_spooled_job_whose_input_the_schedd_lost_is_withdrawn_and_sent_again(
    student, fake_bridge, settings, django_capture_on_commit_callbacks
):
    """The schedd took the job but lost its input files (stopped as they arrived): HTCondor
    holds it awaiting them for good, so the sync takes it back and sends it again."""
    settings.CONDOR_FILE_MODE = "spool"
    spooling = get_bridge()
    job = submission.job_submit_to_pool(submit(student).pk)
    first_cluster = job.cluster_id
    lost = timezone.now() - timedelta(seconds=settings.RESUBMIT_AFTER_S + 1)
    Job.objects.filter(pk=job.pk).update(created_at=lost - timedelta(seconds=1))
    spooling.set_state(
        str(job.public_id),
        CondorState.TRANSFERRING,
        at=lost,
        awaiting_input=True,
        status_detail="uploading input",
    )
    with django_capture_on_commit_callbacks(execute=True):
        sync.jobs_sync()  # withdrawn, queued again and sent (the task runs here)
    job.refresh_from_db()
    assert job.state == JobState.IDLE and job.cluster_id != first_cluster
    assert job.events.filter(kind="resent", detail=sync.STRANDED_DETAIL).exists()
    assert [w.cluster_id for w in spooling.withdrawn] == [first_cluster]
    assert spooling.find(str(job.public_id)).cluster_id == job.cluster_id


def test_a_spooled_job_still_awaiting_its_input_is_left_alone_for_a_while(
    student, fake_bridge, settings
):
    settings.CONDOR_FILE_MODE = "spool"
    spooling = get_bridge()
    job = submission.job_submit_to_pool(submit(student).pk)
    spooling.set_state(
        str(job.public_id),
        CondorState.TRANSFERRING,
        awaiting_input=True,
        status_detail="uploading input",
    )
    sync.jobs_sync()
    assert spooling.withdrawn == []
    assert Job.objects.get(pk=job.pk).cluster_id == job.cluster_id


def test_jobs_that_only_go_to_held_cost_no_read_of_their_timelines(student, fake_bridge):
    """Their "held" event depends on nothing said before (a start, a cancel, a vacate)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    jobs = [submission.job_submit_to_pool(submit(student).pk) for _ in range(3)]
    for job in jobs:
        fake_bridge.set_state(str(job.public_id), CondorState.HELD, hold_reason="held by a test")
    with CaptureQueriesContext(connection) as queries:
        sync.jobs_sync()
    assert [job.events.last().kind for job in jobs] == ["held"] * 3
    reads = [q["sql"] for q in queries if 'FROM "jobs_jobevent"' in q["sql"]]
    assert reads == []
