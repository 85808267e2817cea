"""A sync does not compare again a job whose row and ad are both as they were when the last
cycle found them in line; a change on either side is still seen.

The bridge hands back the very observation of a queue ad whose text has not changed, so
most of a large queue is answered from the last cycle. These tests check the two ways out
of that answer, through `jobs_sync()` with the fake bridge (which also keeps one
observation per job until the job moves).
"""

from datetime import UTC, datetime

import pytest

from condor_bridge import JobState as CondorState
from jobs import specs, submission, sync
from jobs.models import Job, JobState
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 11, 2, 21, 0, tzinfo=UTC)


def running_job(user, fake_bridge) -> Job:
    job = submission.job_submit(
        user=user, spec=specs.JobSpec(name="train", gpus=1), script=script_upload()
    )
    job = submission.job_submit_to_pool(job.pk)
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING, at=T0)
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    return job


def test_a_row_changed_behind_the_syncs_back_is_brought_in_line_though_its_ad_did_not_change(
    student, fake_bridge
):
    job = running_job(student, fake_bridge)
    workstation = job.workstation
    assert sync.jobs_sync().changed == 0  # in line, and remembered so
    Job.objects.filter(pk=job.pk).update(state=JobState.QUEUED, workstation="")
    assert sync.jobs_sync().changed == 1
    job.refresh_from_db()
    assert (job.state, job.workstation) == (JobState.RUNNING, workstation)


def test_an_ad_that_changed_is_applied_though_the_row_did_not(student, fake_bridge):
    job = running_job(student, fake_bridge)
    sync.jobs_sync()
    fake_bridge.set_state(str(job.public_id), CondorState.IDLE)
    assert sync.jobs_sync().changed == 1
    job.refresh_from_db()
    assert job.state == JobState.IDLE
    assert list(job.events.values_list("kind", flat=True))[-1] == "evicted"
