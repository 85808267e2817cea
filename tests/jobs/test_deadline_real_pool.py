"""A job's deadline in the real pool: it reaches HTCondor's ad as its job priority (earlier
deadlines first) and as NightshiftFinishBy, and it runs in its lab's deadline lane, which
the negotiator takes ahead of a labmate who has used less than the job's own user."""

import uuid

import pytest
from django.conf import settings

from condor_bridge import FileMode, JobRequest, JobState
from condor_bridge.schedd import HTCondorBridge
from condor_bridge.submit import DEADLINE_PRIORITY_BASE
from jobs.specs import DEADLINE_ACCOUNTING_USER
from tests.helpers import copy_job_helpers, pool_command, wait_for

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]

FRIDAY = 1_796_482_800  # 2026-12-04 16:00 UTC


@pytest.fixture
def bridge():
    return HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SPOOL,
        instance=f"deadline-{uuid.uuid4().hex[:10]}",
    )


def job_request(folder, script: str, **fields) -> JobRequest:
    folder.mkdir()
    (folder / "outputs").mkdir()
    copy_job_helpers(folder)
    (folder / "train.py").write_text(script)
    return JobRequest(
        job_id=str(uuid.uuid4()),
        job_dir=str(folder),
        script_name="train.py",
        memory_mb=128,
        **fields,
    )


def state(bridge, job_id: str) -> JobState | None:
    job = bridge.find(job_id)
    return job.state if job else None


def test_the_deadline_is_the_jobs_priority_in_the_schedd(bridge, tmp_path, pool_is_up):
    request = job_request(tmp_path / "job", "print('done')\n", finish_by_s=FRIDAY, gpus=0)
    submitted = bridge.submit(request)
    try:
        ad = bridge.job_ad(request.job_id)
        assert ad["JobPrio"] == DEADLINE_PRIORITY_BASE - FRIDAY // 60
        assert ad["NightshiftFinishBy"] == FRIDAY
    finally:
        bridge.act("remove", submitted.cluster_id, submitted.proc_id, reason="test done")


def test_the_labs_deadline_lane_goes_ahead_of_a_labmate_who_used_less(bridge, tmp_path, pool_is_up):
    # A fresh group, so that no earlier test's usage counts. Ada has used ten times what Bob
    # has (their priority factors stand for that history); the lane has used nothing.
    group = f"group_dl{uuid.uuid4().hex[:8]}"
    domain = pool_command("condor_config_val", "UID_DOMAIN").stdout.strip()
    pool_command("condor_userprio", "-setfactor", f"{group}.ada-1@{domain}", "10000")
    pool_command("condor_userprio", "-setfactor", f"{group}.bob-2@{domain}", "2000")
    sleeps = "import time\ntime.sleep(600)\n"
    # Only ws-volta has two GPUs: a job of the group's holds it while the others queue.
    gate = job_request(
        tmp_path / "gate", sleeps, gpus=2, accounting_group=group, accounting_user="gate-3"
    )
    bobs = job_request(
        tmp_path / "bob", sleeps, gpus=2, accounting_group=group, accounting_user="bob-2"
    )
    adas = job_request(
        tmp_path / "ada",
        sleeps,
        gpus=2,
        accounting_group=group,
        accounting_user=DEADLINE_ACCOUNTING_USER,
        finish_by_s=FRIDAY,
    )
    clusters = [bridge.submit(gate)]
    try:
        wait_for(
            lambda: state(bridge, gate.job_id) is JobState.RUNNING,
            timeout=120,
            what="a job to hold ws-volta's two GPUs",
        )
        clusters += [bridge.submit(bobs), bridge.submit(adas)]
        assert bridge.job_ad(adas.job_id)["AccountingGroup"] == f"{group}.deadlines"
        # Both turned away by a negotiation cycle first (ws-volta is taken): a cycle that
        # knew only the submitter the schedd announced first would give it ws-volta.
        wait_for(
            lambda: all(
                (bridge.job_ad(job.job_id) or {}).get("LastRejMatchTime") for job in (bobs, adas)
            ),
            timeout=120,
            what="a negotiation cycle to consider both waiting jobs",
        )
        bridge.act("remove", clusters[0].cluster_id, clusters[0].proc_id, reason="make room")
        wait_for(
            lambda: JobState.RUNNING in (state(bridge, bobs.job_id), state(bridge, adas.job_id)),
            timeout=120,
            what="one of the two waiting jobs to take ws-volta",
        )
        assert state(bridge, adas.job_id) is JobState.RUNNING
        assert state(bridge, bobs.job_id) is JobState.IDLE
    finally:
        for cluster in clusters:
            bridge.act("remove", cluster.cluster_id, cluster.proc_id, reason="test done")
