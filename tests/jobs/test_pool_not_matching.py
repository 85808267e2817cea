"""The pool stops matching (its negotiator is switched off): a job waits while workstations
that could run it stay free. The portal notices, says so on the job page, counts it for
Prometheus and condor_doctor names the negotiator with the fix; once the negotiator is back
the job runs and the explanation goes."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from jobs.models import Job, JobState
from jobs.sync import POOL_STALLED_REASON
from tests.condor_bridge.test_condor_doctor import doctor
from tests.conftest import script_upload
from tests.helpers import pool_command, wait_for
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(420)]

STALL_AFTER_S = "15"


def negotiator_ads() -> str:
    return pool_command("condor_status", "-negotiator", "-af", "Name", check=False).stdout.strip()


@pytest.fixture
def negotiator_stopped(live_pipeline):
    """No negotiator, and a worker that calls a job stalled after 15 s instead of 10 min."""
    live_pipeline.kill_worker()
    live_pipeline.start_worker(NIGHTSHIFT_POOL_STALL_AFTER_S=STALL_AFTER_S)
    pool_command("condor_off", "-daemon", "negotiator")
    wait_for(lambda: not negotiator_ads(), timeout=60, what="the negotiator to stop")

    def start_negotiator() -> None:
        pool_command("condor_on", "-daemon", "negotiator")
        wait_for(negotiator_ads, timeout=60, what="the negotiator to start")

    yield start_negotiator
    if not negotiator_ads():
        start_negotiator()
    live_pipeline.kill_worker()
    live_pipeline.start_worker()


@pytest.fixture
def web(client, transactional_db):
    client.force_login(get_user_model().objects.create_user("nora"))
    return client


def test_a_pool_that_stops_matching_is_noticed_explained_and_diagnosed(
    web, negotiator_stopped, settings
):
    start_negotiator = negotiator_stopped
    response = web.post(
        reverse("jobs:new"),
        {
            "name": "waits",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 0.25,
            "script": script_upload("print('ran')\n"),
        },
    )
    assert response.status_code == 302
    job = Job.objects.get(name="waits")
    wait_for_state(job, {JobState.IDLE})

    def explained() -> bool:
        job.refresh_from_db()
        return job.wait_reason == POOL_STALLED_REASON

    wait_for(explained, timeout=120, what="the job page to say the pool is not matching")
    page = web.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert "The pool is not matching jobs to workstations" in page
    assert "The administrators have been told." in page
    assert "nightshift_jobs_stalled 1.0" in web.get("/metrics").content.decode()

    settings.POOL_STALL_AFTER_S = int(STALL_AFTER_S)
    said, error = doctor()
    assert error is not None and "negotiator" in error and "matching" in error, said
    assert "No negotiator reports to the collector" in said
    assert "condor_on -daemon negotiator" in said
    assert "1 idle job of this portal has waited over 15 s" in said

    start_negotiator()
    wait_for_state(job, {JobState.COMPLETED}, timeout=180)
    assert job.wait_reason == ""
    assert "nightshift_jobs_stalled 0.0" in web.get("/metrics").content.decode()
