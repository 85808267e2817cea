"""The Celery worker is killed with SIGKILL, repeatedly, while it submits a burst: tasks
are acknowledged late and come back, and the exactly-once check adopts what the schedd
already has instead of submitting it again."""

import time

import pytest

from jobs.models import Job
from tests.faults.conftest import BURST

pytestmark = [pytest.mark.condor, pytest.mark.timeout(900)]


def test_a_worker_killed_mid_burst_submits_every_job_exactly_once(burst, live_pipeline):
    jobs = burst.submit(BURST)
    kills = 0
    # Kill it as soon as it has submitted some, a few times over, then let one finish.
    for _ in range(3):
        deadline = time.monotonic() + 60
        submitted = Job.objects.filter(pk__in=[j.pk for j in jobs], cluster_id__isnull=False)
        before = submitted.count()
        while submitted.count() < min(before + 5, BURST) and time.monotonic() < deadline:
            time.sleep(0.05)
        live_pipeline.kill_worker()
        kills += 1
        live_pipeline.start_worker()
    assert kills == 3
    burst.assert_each_ran_once_and_completed()
