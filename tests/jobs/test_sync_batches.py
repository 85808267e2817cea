"""A sync with more changed jobs than one batch holds applies the batches side by side, on
connections of their own, and each change exactly once."""

import pytest

from condor_bridge import JobObservation
from condor_bridge import JobState as Condor
from jobs import sync
from jobs.models import Job, JobEvent, JobState
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def waiting_jobs():
    owner = UserFactory()
    Job.objects.bulk_create(
        Job(
            owner=owner,
            name=f"run {n}",
            output_dir="/none",
            state=JobState.IDLE,
            cluster_id=7,
            proc_id=n,
            request={"gpus": 1},
        )
        for n in range(120)
    )
    return list(Job.objects.order_by("pk"))


def held(job: Job) -> JobObservation:
    return JobObservation(
        job_id=str(job.public_id),
        cluster_id=7,
        proc_id=job.proc_id,
        state=Condor.HELD,
        in_queue=True,
        hold_reason="Out of GPU memory",
        hold_reason_code=34,
    )


def test_every_batch_is_applied_once_whatever_thread_applies_it(waiting_jobs, monkeypatch):
    monkeypatch.setattr(sync, "APPLY_BATCH", 50)

    changed = sync.jobs_apply_observations({job.pk: held(job) for job in waiting_jobs})

    assert changed == {job.pk for job in waiting_jobs}
    assert set(Job.objects.values_list("state", "hold_reason")) == {
        (JobState.HELD, "Out of GPU memory")
    }
    held_events = JobEvent.objects.filter(kind="held")
    assert sorted(held_events.values_list("job_id", flat=True)) == [j.pk for j in waiting_jobs]


def test_a_job_whose_row_moved_on_since_it_was_read_is_left_alone_in_any_batch(
    waiting_jobs, monkeypatch
):
    monkeypatch.setattr(sync, "APPLY_BATCH", 50)
    as_read = {job.pk: sync.sync_row(job) for job in waiting_jobs}
    moved = waiting_jobs[75]
    Job.objects.filter(pk=moved.pk).update(state=JobState.RUNNING)

    changed = sync.jobs_apply_observations(
        {job.pk: held(job) for job in waiting_jobs}, as_read=as_read
    )

    assert changed == {job.pk for job in waiting_jobs} - {moved.pk}
    assert Job.objects.get(pk=moved.pk).state == JobState.RUNNING
    assert not JobEvent.objects.filter(job=moved).exists()
