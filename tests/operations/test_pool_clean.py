"""`pool clean`, which make test runs before its tests: a test run killed midway (a session
ending, a CI timeout) leaves jobs queued and owners at their desks, and the next run's tests
would wait on workstations those jobs hold."""

import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from condor_bridge import FileMode, JobRequest, JobState
from condor_bridge.schedd import HTCondorBridge
from tests.helpers import POOL_ROOT, make_job_dir, wait_for

pytestmark = pytest.mark.condor

POOL = Path(__file__).resolve().parents[2] / "deploy/personal-pool/pool"
SLEEPER = "import time\ntime.sleep(600)\n"


def bridge_of(instance: str) -> HTCondorBridge:
    return HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SHARED,
        instance=instance,
    )


def sleeper(bridge: HTCondorBridge) -> str:
    job_id, directory = make_job_dir(settings.JOBS_DIR, SLEEPER, uid=settings.JOB_DIR_UID)
    bridge.submit(
        JobRequest(job_id=job_id, job_dir=str(directory), script_name="train.py", memory_mb=256)
    )
    return job_id


def clean(kept_instance: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(POOL), "clean"],
        env=os.environ | {"NIGHTSHIFT_INSTANCE": kept_instance},
        capture_output=True,
        text=True,
        timeout=200,
    )


def test_clean_removes_the_jobs_of_other_instances_and_keeps_make_runs(pool_is_up):
    killed_run = bridge_of(f"test-killed-{uuid.uuid4().hex[:8]}")
    make_run = bridge_of(f"kept-{uuid.uuid4().hex[:8]}")
    left_behind = [sleeper(killed_run), sleeper(killed_run)]
    wait_for(
        lambda: killed_run.find(left_behind[0]).state is JobState.RUNNING,
        timeout=120,
        what="a job the killed run left to be running",
    )
    kept = sleeper(make_run)
    owner_flag = POOL_ROOT / "var/lib/nightshift-owner/ws-fermi"
    owner_flag.write_text("active\n")
    try:
        done = clean(make_run.instance)
        assert done.returncode == 0, done.stderr
        # At least these two: earlier tests of this run may have left jobs of their own.
        removed = re.search(r"clean: (\d+) jobs of other portal instances removed", done.stdout)
        assert removed and int(removed[1]) >= 2, done.stdout
        assert all(not killed_run.find(job_id).in_queue for job_id in left_behind)
        assert make_run.find(kept).in_queue
        assert not owner_flag.exists()
    finally:
        owner_flag.unlink(missing_ok=True)
        for job in make_run.active_jobs():
            make_run.act("remove", job.cluster_id, job.proc_id, reason="test cleanup")


def test_clean_refuses_an_instance_name_that_is_not_a_plain_word(pool_is_up):
    done = clean('x" || true || "')
    assert done.returncode != 0
    assert "NIGHTSHIFT_INSTANCE must be letters, digits and dashes" in done.stderr
