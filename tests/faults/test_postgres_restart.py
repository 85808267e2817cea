"""PostgreSQL drops every connection in the middle of a burst: the web, the worker and beat
reconnect by themselves, and no job is lost or run twice."""

import pytest
from django.urls import reverse

from tests.faults.conftest import BURST, postgres_drops_every_connection

pytestmark = [pytest.mark.condor, pytest.mark.timeout(900)]


def test_web_and_workers_reconnect_after_the_database_drops_them(burst, live_pipeline):
    burst.submit(BURST // 2)
    postgres_drops_every_connection()
    # The web's next request gets a fresh connection (CONN_HEALTH_CHECKS), not an error.
    assert burst.api.get(reverse("api:job-list")).status_code == 200
    burst.submit(BURST - BURST // 2)
    postgres_drops_every_connection()
    burst.assert_each_ran_once_and_completed()
    assert live_pipeline.worker.poll() is None  # the same worker process, never restarted
