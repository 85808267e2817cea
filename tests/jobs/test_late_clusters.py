"""A cluster submitted for late materialization has runs its schedd has not made yet: they
are in neither its queue nor its history. The sync must not read the whole history looking
for them at every cycle, and an action on one must not pretend to be done (HTCondor ignores
it, and would make the job later as if nothing had been asked)."""

import uuid

import pytest

from condor_bridge import JobState as Condor
from jobs import actions, specs, sync
from jobs.models import Job, JobState

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def late_runs(student, fake_bridge, tmp_path):
    """Three recorded runs of one cluster whose schedd keeps one job of it at a time."""
    request = {"script_name": "train.py", "memory_mb": 256, "gpus": 0}
    jobs = [
        Job.objects.create(
            owner=student, name=f"run {n}", output_dir=str(tmp_path), request=request
        )
        for n in range(3)
    ]
    requests = [specs.job_request_of(job) for job in jobs]
    results = fake_bridge.submit_cluster(
        requests, sweep_id=str(uuid.uuid4()), check_existing=False, materialize_at_most=1
    )
    for job, result in zip(jobs, results, strict=True):
        job.cluster_id, job.proc_id, job.state = result.cluster_id, result.proc_id, JobState.IDLE
        job.save(update_fields=["cluster_id", "proc_id", "state"])
    return jobs


@pytest.fixture
def history_asked(fake_bridge, monkeypatch):
    asked = []
    finished_jobs = fake_bridge.finished_jobs

    def recorded(job_ids):
        job_ids = sorted(job_ids)
        asked.append(job_ids)
        return finished_jobs(job_ids)

    monkeypatch.setattr(fake_bridge, "finished_jobs", recorded)
    return asked


def test_runs_not_made_yet_are_not_looked_for_in_the_history(late_runs, history_asked):
    sync.jobs_sync()

    assert history_asked == []
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.IDLE}


def test_a_run_that_left_the_queue_is_still_found_in_the_history(
    late_runs, history_asked, fake_bridge
):
    first, second, third = late_runs
    # The schedd makes the second when the first leaves its queue.
    fake_bridge.set_state(str(first.public_id), Condor.COMPLETED, exit_code=0)

    sync.jobs_sync()

    assert history_asked == [[str(first.public_id)]]
    states = dict(Job.objects.values_list("pk", "state"))
    assert [states[job.pk] for job in late_runs] == [JobState.COMPLETED] + [JobState.IDLE] * 2


def test_a_run_not_made_yet_cannot_be_cancelled_alone_and_nothing_changes(late_runs, student):
    third = late_runs[2]

    with pytest.raises(actions.JobActionError, match="has not made job .* yet"):
        actions.job_cancel(job=third, user=student)

    third.refresh_from_db()
    assert (third.state, third.status_detail) == (JobState.IDLE, "")
    assert not third.events.filter(kind="cancel requested").exists()
