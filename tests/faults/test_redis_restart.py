"""Redis restarts and loses every queued task: the database is the source of truth, and the
sync's reconciler sends the lost submissions again."""

import pytest

from jobs.models import Job
from tests.faults.conftest import BURST, redis_loses_everything

pytestmark = [pytest.mark.condor, pytest.mark.timeout(900)]


def test_submissions_lost_with_redis_are_recovered_from_the_database(burst, live_pipeline):
    live_pipeline.kill_worker()  # the tasks pile up in Redis, unconsumed
    jobs = burst.submit(BURST - 5)
    redis_loses_everything()
    assert Job.objects.filter(pk__in=[j.pk for j in jobs], cluster_id__isnull=True).count() == 45
    burst.submit(5)  # the web's connection to Redis was cut too: it reconnects to enqueue
    live_pipeline.start_worker()
    # Every task went with Redis: only the reconciler can have sent them.
    burst.assert_each_ran_once_and_completed()
