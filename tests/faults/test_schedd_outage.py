"""The schedd stops in the middle of a burst and starts again: jobs wait, visibly, then
go through, each exactly once."""

import pytest
from django.urls import reverse

from jobs.models import Job, JobState
from tests.faults.conftest import BURST
from tests.helpers import wait_for

pytestmark = [pytest.mark.condor, pytest.mark.timeout(900)]


def test_jobs_wait_for_a_stopped_scheduler_and_then_run_once(burst, schedd_stopped):
    stop, start = schedd_stopped
    burst.submit(BURST // 2)
    stop()
    waiting = burst.submit(BURST - BURST // 2)

    def told_to_wait():
        job = Job.objects.get(pk=waiting[-1].pk)
        return job.state == JobState.QUEUED and "scheduler is not answering" in job.status_detail

    wait_for(told_to_wait, timeout=120, what="the portal to say the scheduler is not answering")
    page = burst.api.get(reverse("api:job-detail", args=[waiting[-1].public_id])).json()
    assert page["state_label"] == "Waiting for the scheduler"
    assert "keeps trying" in page["status_detail"]
    start()
    burst.assert_each_ran_once_and_completed()
