"""Issue 8's faults again, with the portal in front of two schedds (the personal pool's
`pool schedds 2`, jobs to the least loaded): a burst spreads over both, and the same two
promises hold across them, every accepted job exactly once in HTCondor (both schedds'
queues and histories, counted with HTCondor's own tools) and each one completed."""

import pytest
from django.urls import reverse

from jobs.models import Job, JobState
from tests.faults.conftest import (
    assert_each_change_recorded_once,
    assert_spread_over,
    postgres_drops_every_connection,
    redis_loses_everything,
    syncs_overlap_until_final,
)
from tests.helpers import pool_command, wait_for

pytestmark = [
    pytest.mark.condor,
    pytest.mark.timeout(900),
    pytest.mark.usefixtures("second_schedd_for_the_module"),
]

BURST = 24


def test_a_worker_killed_mid_burst_submits_each_job_once_on_its_own_schedd(
    spread_burst, two_schedds, live_pipeline
):
    jobs = spread_burst.submit(BURST)
    assert_spread_over(two_schedds, jobs)
    for _ in range(3):
        submitted = Job.objects.filter(pk__in=[j.pk for j in jobs], cluster_id__isnull=False)
        before = submitted.count()
        wait_for(
            lambda before=before: submitted.count() >= min(before + 3, BURST),
            timeout=60,
            interval=0.05,
            what="a few more submissions",
        )
        live_pipeline.kill_worker()
        live_pipeline.start_worker(**live_pipeline.worker_env)
    spread_burst.assert_each_ran_once_and_completed()


def test_submissions_lost_with_redis_are_sent_once_to_each_jobs_schedd(
    spread_burst, two_schedds, live_pipeline
):
    live_pipeline.kill_worker()  # the tasks pile up in Redis, unconsumed
    jobs = spread_burst.submit(BURST - 4)
    redis_loses_everything()
    spread_burst.submit(4)
    assert_spread_over(two_schedds, spread_burst.jobs)
    live_pipeline.start_worker(**live_pipeline.worker_env)
    # Every task went with Redis: only the reconciler can have sent them.
    spread_burst.assert_each_ran_once_and_completed()
    assert not Job.objects.filter(pk__in=[j.pk for j in jobs], cluster_id__isnull=True).exists()


def test_the_database_dropping_every_connection_loses_nothing_on_either_schedd(
    spread_burst, two_schedds, live_pipeline
):
    spread_burst.submit(BURST // 2)
    postgres_drops_every_connection()
    assert spread_burst.api.get(reverse("api:job-list")).status_code == 200
    spread_burst.submit(BURST - BURST // 2)
    postgres_drops_every_connection()
    assert_spread_over(two_schedds, spread_burst.jobs)
    spread_burst.assert_each_ran_once_and_completed()
    assert live_pipeline.worker.poll() is None  # the same worker process, never restarted


def test_syncs_overlapping_over_two_schedds_record_every_change_once(spread_burst, two_schedds):
    jobs = spread_burst.submit(BURST)
    assert_spread_over(two_schedds, jobs)
    syncs_overlap_until_final(spread_burst)
    assert_each_change_recorded_once(spread_burst, jobs)


# Last: the second schedd it stops and starts again runs for every test before it
# (tests.pipeline.second_schedd_for_the_module).
def test_one_schedd_stopped_mid_burst_holds_up_only_its_jobs_and_then_each_runs_once(
    spread_burst, two_schedds
):
    first, second = two_schedds
    spread_burst.submit(BURST // 2)
    pool_command("condor_off", "-daemon", "SCHEDD_AP2")
    try:
        later = spread_burst.submit(BURST - BURST // 2)
        assert_spread_over(two_schedds, later)
        waiting = [job for job in later if job.schedd == second]

        def told_to_wait() -> bool:
            job = Job.objects.get(pk=waiting[-1].pk)
            return job.state == JobState.QUEUED and "not answering" in job.status_detail

        wait_for(told_to_wait, timeout=120, what="ap2's jobs to wait for their scheduler")
        # The other schedd's jobs go on meanwhile, and end.
        going = [job.pk for job in spread_burst.jobs if job.schedd == first]
        wait_for(
            lambda: (
                Job.objects.filter(pk__in=going, state=JobState.COMPLETED).count() == len(going)
            ),
            timeout=300,
            what="the first schedd's jobs",
        )
    finally:
        pool_command("condor_on", "-daemon", "SCHEDD_AP2")
    spread_burst.assert_each_ran_once_and_completed()
