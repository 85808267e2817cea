"""A job sent twice (a resend that found nothing while the first submit was still in flight)
has a second copy in HTCondor's queue: the sync removes it, says so, and never reads the copy's
state into the job."""

import pytest

from audit.models import AuditEntry
from condor_bridge import JobRequest
from condor_bridge import JobState as CondorState
from jobs import specs, submission, sync
from jobs.bridge import get_bridge
from jobs.models import Job, JobState
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db

AP1, AP2 = "ap1@campus.example", "ap2@campus.example"


def queued(user) -> Job:
    return submission.job_submit(
        user=user, spec=specs.JobSpec(name="train"), script=script_upload()
    )


def submitted(user) -> Job:
    return submission.job_submit_to_pool(queued(user).pk)


def send_again(bridge, job: Job):
    """What a resend that did not look first does: another job with the same id."""
    request = JobRequest(
        job_id=str(job.public_id), job_dir=job.output_dir, script_name="train.py", memory_mb=256
    )
    return bridge.submit(request, check_existing=False)


def removals(bridge) -> list[tuple[int, int]]:
    return [(cluster, proc) for action, cluster, proc, _ in bridge.actions if action == "remove"]


def test_a_second_copy_is_removed_and_the_timeline_and_audit_log_say_so(student, fake_bridge):
    job = submitted(student)
    copy = send_again(fake_bridge, job)

    report = sync.jobs_sync()

    assert report.second_copies_removed == 1
    assert removals(fake_bridge) == [(copy.cluster_id, copy.proc_id)]
    event = job.events.get(kind="second copy removed")
    assert f"removed the copy cluster {copy.cluster_id}.0 and kept {job.cluster_id}.0" in (
        event.detail
    )
    assert AuditEntry.objects.filter(
        action="job.second_copy_remove", target_id=str(job.public_id)
    ).exists()
    job.refresh_from_db()
    assert job.cluster_id != copy.cluster_id
    assert sync.jobs_sync().second_copies_removed == 0


@pytest.mark.parametrize("leaving", [CondorState.REMOVED, CondorState.COMPLETED])
def test_a_copy_already_leaving_the_queue_is_not_removed_again(student, fake_bridge, leaving):
    """A removed copy stays listed until its shadow has gone, and a spooled one that ended
    waits for outputs nobody fetches: neither gets another removal or event each cycle."""
    job = submitted(student)
    send_again(fake_bridge, job)
    # The fake moves the newest job of an id: here the copy.
    fake_bridge.set_state(str(job.public_id), leaving, exit_code=0, in_queue=True)

    assert sync.jobs_sync().second_copies_removed == 0
    assert removals(fake_bridge) == []
    assert not job.events.filter(kind="second copy removed").exists()


def test_the_second_copys_state_is_never_read_into_the_job(student, fake_bridge):
    job = submitted(student)
    copy = send_again(fake_bridge, job)
    # The fake moves the newest job of an id: here the copy, not the one the row records.
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING)

    sync.jobs_sync()

    job.refresh_from_db()
    assert (job.state, job.num_starts, job.workstation) == (JobState.IDLE, 0, "")
    assert removals(fake_bridge) == [(copy.cluster_id, copy.proc_id)]
    assert not job.events.filter(kind="started").exists()


def test_over_two_schedds_only_the_copy_is_removed_from_the_jobs_own_schedd(
    student, settings, fake_bridge
):
    """Every attempt goes to the schedd chosen when the job was made, so that is where a copy
    lands."""
    settings.CONDOR_SCHEDDS = [AP1, AP2]
    first, second = submitted(student), submitted(student)
    assert {first.schedd, second.schedd} == {AP1, AP2}
    copy = send_again(get_bridge(second.schedd), second)

    sync.jobs_sync()

    assert removals(get_bridge(second.schedd)) == [(copy.cluster_id, copy.proc_id)]
    assert removals(get_bridge(first.schedd)) == []
    assert not first.events.filter(kind="second copy removed").exists()


def test_copies_of_a_job_whose_submission_is_not_recorded_yet_are_left_alone(student, fake_bridge):
    job = queued(student)
    send_again(fake_bridge, job)
    send_again(fake_bridge, job)

    assert sync.jobs_sync().second_copies_removed == 0
    assert removals(fake_bridge) == []


def test_a_finished_job_waiting_in_the_queue_for_its_outputs_is_not_a_copy(student, fake_bridge):
    job = submitted(student)
    # A spooled job that ended stays in the queue until its outputs are fetched.
    fake_bridge.set_state(str(job.public_id), CondorState.COMPLETED, exit_code=0, in_queue=True)
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.state == JobState.COMPLETED

    assert sync.jobs_sync().second_copies_removed == 0
    assert removals(fake_bridge) == []
