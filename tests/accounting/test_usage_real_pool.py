"""Usage records from jobs run on the personal pool agree with HTCondor's own history."""

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from accounting.models import CapacitySample, UsageRecord
from accounting.services import capacity_sample_pool
from jobs.bridge import get_bridge
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.helpers import job_story, wait_for
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]


@pytest.fixture
def student_on_the_web(client, transactional_db):
    user = get_user_model().objects.create_user("ada", password="a-long-test-password")
    client.force_login(user)
    return client


def test_an_evicted_two_gpu_job_has_one_record_per_run_matching_the_history(
    student_on_the_web, live_pipeline
):
    response = student_on_the_web.post(
        reverse("jobs:new"),
        {
            "name": "two gpus",
            "gpus": 2,
            "cpus": 1,
            "memory_gb": 0.25,
            "arguments": "",
            "script": script_upload("import time\ntime.sleep(12)\n"),
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.latest("created_at")
    wait_for_state(job, {JobState.RUNNING}, timeout=120)
    open_run = wait_for(
        lambda: UsageRecord.objects.filter(job=job, ended_at=None).first(),
        timeout=30,
        what="the open run's record",
    )
    assert (open_run.workstation, open_run.gpus) == ("ws-volta", 2)
    # The collector learns of the claim at the workstation's next update, which can come
    # after the schedd reports the job running; samples read the collector.
    wait_for(
        lambda: any(
            m.name == "ws-volta" and m.free_gpus == 0 for m in get_bridge().pool_machines()
        ),
        timeout=60,
        what="the collector to see ws-volta's GPUs taken",
    )
    # Beat samples capacity too (sample-capacity), and the first sample of an interval is the
    # one kept: a tick between the upload and now, before the job ran, would stand in for
    # this one. Filed a day back, this sample is in an interval no tick of this test reaches.
    a_day_ago = timezone.now() - timedelta(days=1)
    capacity_sample_pool(now=a_day_ago)
    volta = CapacitySample.objects.get(workstation="ws-volta", taken_at__lte=a_day_ago)
    assert (volta.total_gpus, volta.nightshift_gpus, volta.idle_gpus) == (2, 2, 0), job_story(
        job, "ws-volta"
    )
    time.sleep(3)
    # What a workstation's owner coming back causes: the job is vacated, then runs again.
    get_bridge().act("vacate", job.cluster_id, job.proc_id)
    wait_for_state(job, {JobState.COMPLETED}, timeout=180)
    records = list(UsageRecord.objects.filter(job=job).order_by("started_at"))
    assert [r.ended_by for r in records] == ["evicted", "completed"], job_story(job, "ws-volta")
    assert records[0].badput_s == records[0].wall_s > 0
    assert records[1].committed_s == records[1].wall_s >= 8
    history = get_bridge().job_ad(str(job.public_id))
    recorded = sum(r.gpu_hours() for r in records)
    expected = history["RemoteWallClockTime"] * history["RequestGPUs"] / 3600
    one_sync = settings.JOB_SYNC_INTERVAL * 2 / 3600
    assert abs(recorded - expected) <= one_sync
    assert sum(r.committed_s for r in records) == history["CommittedTime"]
