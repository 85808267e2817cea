"""The whole pool restarts while a burst runs: HTCondor re-runs or reconnects its jobs, and
the portal's states follow; beat is restarted in the middle of a sync too."""

import pytest

from jobs.models import Job, JobState
from tests.faults.conftest import BURST
from tests.helpers import pool_command, schedd_answers, wait_for

pytestmark = [pytest.mark.condor, pytest.mark.timeout(900)]

SLOWER_JOB = "import time\ntime.sleep(15)\nprint('done', flush=True)\n"


def test_jobs_running_through_a_pool_restart_end_completed_once(burst, live_pipeline):
    jobs = burst.submit(BURST, script=SLOWER_JOB)
    wait_for(
        lambda: Job.objects.filter(pk__in=[j.pk for j in jobs], state=JobState.RUNNING).exists(),
        timeout=180,
        what="some of the burst to run",
    )
    pool_command("condor_restart")
    live_pipeline.restart_beat()  # and beat, wherever its sync was
    wait_for(schedd_answers, timeout=180, what="the pool to come back")
    burst.assert_each_ran_once_and_completed()
