"""A sync whose view of the queue is older than another sync's never undoes it.

Syncs overlap (a slow tick while beat fires the next, or several schedds asked at once). One
that asked HTCondor before another sync wrote a fresher answer must not write its older one
over it: a running job would go back to waiting, its timeline would say it was evicted, and
its run would be ended in the usage records.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from accounting.models import UsageRecord
from condor_bridge import JobState as CondorState
from jobs import specs, submission, sync
from jobs.models import Job, JobState
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 11, 2, 21, 0, tzinfo=UTC)


def submit(user) -> Job:
    job = submission.job_submit(
        user=user, spec=specs.JobSpec(name="train", gpus=1), script=script_upload()
    )
    return submission.job_submit_to_pool(job.pk)


def a_later_sync_runs_while_this_one_asks(fake_bridge, monkeypatch, change, before=None) -> None:
    """The next `jobs_sync()` takes its answer from the queue as it is (after `before`),
    then `change` moves the queue on and a whole other sync runs and ends before the first
    one writes."""
    asked = fake_bridge.active_jobs
    calls = []

    def answer_then_let_another_sync_run():
        calls.append(1)
        if len(calls) == 1 and before is not None:
            before()
        seen = asked()
        if len(calls) == 1:
            change()
            sync.jobs_sync()
        return seen

    monkeypatch.setattr(fake_bridge, "active_jobs", answer_then_let_another_sync_run)


def test_a_sync_that_saw_the_job_waiting_leaves_it_running(student, fake_bridge, monkeypatch):
    job = submit(student)
    job_id = str(job.public_id)
    sync.jobs_sync()
    a_later_sync_runs_while_this_one_asks(
        fake_bridge, monkeypatch, lambda: fake_bridge.set_state(job_id, CondorState.RUNNING, at=T0)
    )
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert list(job.events.values_list("kind", flat=True)) == ["created", "submitted", "started"]
    assert UsageRecord.objects.filter(job=job, ended_at=None).count() == 1


def test_a_sync_that_saw_the_job_running_leaves_its_end_recorded_once(
    student, fake_bridge, monkeypatch
):
    job = submit(student)
    job_id = str(job.public_id)
    fake_bridge.set_state(job_id, CondorState.RUNNING, at=T0)
    sync.jobs_sync()
    a_later_sync_runs_while_this_one_asks(
        fake_bridge,
        monkeypatch,
        lambda: fake_bridge.set_state(
            job_id, CondorState.COMPLETED, at=T0 + timedelta(minutes=5), exit_code=0
        ),
    )
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.state == JobState.COMPLETED
    assert list(job.events.values_list("kind", flat=True)) == [
        "created",
        "submitted",
        "started",
        "completed",
        "outputs",
    ]
    assert list(UsageRecord.objects.filter(job=job).values_list("wall_s", flat=True)) == [300.0]


def test_the_next_sync_brings_in_what_the_older_one_left(student, fake_bridge, monkeypatch):
    job = submit(student)
    job_id = str(job.public_id)
    a_later_sync_runs_while_this_one_asks(
        fake_bridge, monkeypatch, lambda: fake_bridge.set_state(job_id, CondorState.RUNNING, at=T0)
    )
    sync.jobs_sync()
    fake_bridge.set_state(job_id, CondorState.COMPLETED, at=T0 + timedelta(minutes=5), exit_code=0)
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.state == JobState.COMPLETED
    assert list(UsageRecord.objects.filter(job=job).values_list("wall_s", flat=True)) == [300.0]


def test_a_sync_that_saw_a_run_another_sync_saw_end_does_not_start_it_again(
    student, fake_bridge, monkeypatch
):
    """The first sync sees the job start; before it writes, the owner comes back and a later
    sync records the eviction. The older answer (running) differs from the row the first
    sync read (waiting), so only knowing that the row moved on keeps it from being written."""
    job = submit(student)
    job_id = str(job.public_id)
    sync.jobs_sync()
    a_later_sync_runs_while_this_one_asks(
        fake_bridge,
        monkeypatch,
        before=lambda: fake_bridge.set_state(job_id, CondorState.RUNNING, at=T0),
        change=lambda: fake_bridge.set_state(
            job_id, CondorState.IDLE, at=T0 + timedelta(minutes=5)
        ),
    )
    sync.jobs_sync()
    job.refresh_from_db()
    assert (job.state, job.num_starts) == (JobState.IDLE, 1)
    assert list(job.events.values_list("kind", flat=True)) == [
        "created",
        "submitted",
        "started",
        "evicted",
    ]
    monkeypatch.undo()
    assert sync.jobs_sync().changed == 0
    assert list(UsageRecord.objects.filter(job=job).values_list("wall_s", flat=True)) == [300.0]


def test_a_run_no_sync_saw_still_says_where_it_ran(student, fake_bridge):
    job = submit(student)
    job_id = str(job.public_id)
    sync.jobs_sync()
    fake_bridge.set_state(job_id, CondorState.RUNNING, at=T0)
    workstation = fake_bridge.find(job_id).workstation
    fake_bridge.set_state(job_id, CondorState.COMPLETED, at=T0 + timedelta(minutes=5), exit_code=0)
    sync.jobs_sync()
    assert list(job.events.values_list("kind", "detail")) == [
        ("created", "Uploaded train.py"),
        ("submitted", "HTCondor job 1.0 (submitted)"),
        ("started", f"Ran on {workstation} from {timezone.localtime(T0):%H:%M:%S}"),
        ("completed", "Exited with code 0."),
        ("outputs", "0 output files ready"),
    ]
