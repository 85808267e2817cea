"""The whole pool restarted while a burst runs on both of its schedds (the second one's
jobs spooled): every job ends completed, once. Beside tests/faults/test_two_schedds.py, in
make test's first pool run: the two take about as long as each other."""

import pytest

from jobs.models import Job, JobState
from tests.faults.conftest import assert_spread_over
from tests.helpers import pool_command, schedd_answers, wait_for

pytestmark = [pytest.mark.condor, pytest.mark.timeout(900)]

BURST = 24
SLOWER_JOB = "import time\ntime.sleep(15)\nprint('done', flush=True)\n"


def test_jobs_on_both_schedds_through_a_pool_restart_end_completed_once(
    spread_burst, two_schedds, live_pipeline
):
    jobs = spread_burst.submit(BURST, script=SLOWER_JOB)
    assert_spread_over(two_schedds, jobs)
    # ap2's jobs start last (its input goes through the spool): the restart catches them
    # running, with whatever of the first schedd's is still there.
    running = Job.objects.filter(
        pk__in=[j.pk for j in jobs], schedd=two_schedds[1], state=JobState.RUNNING
    )
    wait_for(running.exists, timeout=240, what="a job of the second schedd to run")
    pool_command("condor_restart")  # the master restarts every daemon, ap2's schedd too
    live_pipeline.restart_beat()
    wait_for(schedd_answers, timeout=180, what="the pool to come back")
    spread_burst.assert_each_ran_once_and_completed()
