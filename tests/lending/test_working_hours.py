"""On the personal pool: workstations on the "nights" policy take no new jobs in working
hours. The test sets the working day to the whole day, so "now" is always inside it."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from jobs.bridge import get_bridge
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.helpers import pool_config, wait_for
from tests.pipeline import settle, wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]

ALL_DAY_IS_WORKING_HOURS = """
NIGHTSHIFT_AVAILABILITY = nights
NIGHTSHIFT_WORKDAYS = True
NIGHTSHIFT_WORKDAY_START = 0
NIGHTSHIFT_WORKDAY_END = 1440
"""


@pytest.fixture
def working_hours():
    pool_config(ALL_DAY_IS_WORKING_HOURS, "60-test-working-hours.conf")
    yield
    pool_config(None, "60-test-working-hours.conf")


def gpu_machines_owned() -> bool:
    machines = [m for m in get_bridge().pool_machines() if m.total_gpus]
    return bool(machines) and all(m.state == "Owner" for m in machines)


def test_no_job_starts_in_working_hours_and_it_runs_once_the_night_begins(
    client, transactional_db, working_hours, live_pipeline
):
    user = get_user_model().objects.create_user("ada", password="a-long-test-password")
    client.force_login(user)
    wait_for(gpu_machines_owned, timeout=60, what="the workstations to keep jobs off")
    response = client.post(
        reverse("jobs:new"),
        {
            "name": "night job",
            "gpus": 1,
            "cpus": 1,
            "memory_gb": 0.25,
            "arguments": "",
            "script": script_upload("print('ran at night')\n"),
        },
    )
    assert response.status_code == 302
    job = Job.objects.latest("created_at")
    wait_for_state(job, {JobState.IDLE}, timeout=60)
    settle(15)  # several negotiation cycles
    job.refresh_from_db()
    assert job.state == JobState.IDLE and job.num_starts == 0
    assert "owner" in job.wait_reason.lower()
    pool_config(None, "60-test-working-hours.conf")  # the working day ends
    wait_for_state(job, {JobState.COMPLETED}, timeout=120)
