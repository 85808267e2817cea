"""Quotas on the real pool: fair-share accounting in the job ad, and a runtime limit enforced
by HTCondor itself."""

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.urls import reverse

from accounting.models import UsageRecord
from jobs.bridge import get_bridge
from jobs.models import Job, JobOutcome, JobState
from labs.models import Lab, Membership
from tests.conftest import script_upload
from tests.helpers import wait_for
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]


@pytest.fixture
def lab_member(client, transactional_db):
    user = get_user_model().objects.create_user("ada", password="a-long-test-password")
    lab = Lab.objects.create(name="Vision Lab", max_runtime_hours=1 / 60)  # one minute
    Membership.objects.create(lab=lab, user=user)
    client.force_login(user)
    return client, user, lab


def submit(client, script: str) -> Job:
    response = client.post(
        reverse("jobs:new"),
        {
            "name": "sleeper",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 0.25,
            "arguments": "",
            "script": script_upload(script),
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    return Job.objects.latest("created_at")


def test_the_job_ad_carries_the_labs_group_and_the_user(lab_member, live_pipeline):
    client, user, lab = lab_member
    job = submit(client, "import time\ntime.sleep(600)\n")
    wait_for(
        lambda: Job.objects.get(pk=job.pk).cluster_id is not None,
        timeout=60,
        what="the job to reach the schedd",
    )
    ad = get_bridge().job_ad(str(job.public_id))
    assert ad["AcctGroup"] == lab.accounting_group == "group_vision_lab"
    assert ad["AcctGroupUser"] == f"ada-{user.pk}"
    assert ad["AccountingGroup"] == f"group_vision_lab.ada-{user.pk}"


def test_a_job_over_the_quotas_runtime_limit_is_removed_by_htcondor(lab_member, live_pipeline):
    client, _, _ = lab_member
    job = submit(client, "import time\nprint('started', flush=True)\ntime.sleep(600)\n")
    assert job.request["remove_after_s"] == 60
    wait_for_state(job, {JobState.RUNNING}, timeout=120)
    wait_for_state(job, {JobState.REMOVED}, timeout=150)
    assert "ran longer than 1 minute, the runtime limit of its quota" in job.status_detail
    assert job.events.filter(kind="removed").exists()
    assert job.outcome == JobOutcome.RUNTIME_LIMIT
    # Its run is counted, as HTCondor counted it, and ended by the removal.
    (run,) = UsageRecord.objects.filter(job=job)
    history = get_bridge().job_ad(str(job.public_id))
    assert run.ended_by == "removed" and run.ended_at is not None
    assert abs(run.wall_s - history["RemoteWallClockTime"]) <= settings.JOB_SYNC_INTERVAL
