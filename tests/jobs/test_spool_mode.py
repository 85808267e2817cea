"""Spool mode: no shared file system; inputs are spooled and outputs retrieved."""

import time
import uuid

import pytest
from django.conf import settings

from condor_bridge import FileMode, JobRequest, JobState
from condor_bridge.schedd import HTCondorBridge
from jobs.selectors import job_metrics
from tests.helpers import wait_for

pytestmark = pytest.mark.condor


def test_a_spooled_job_runs_and_its_outputs_come_back(tmp_path, pool_is_up):
    # tmp_path is outside the pool's root: nothing is shared, everything must travel.
    (tmp_path / "outputs").mkdir()
    (tmp_path / ".nightshift").mkdir()
    (tmp_path / "train.py").write_text(
        "open('outputs/result.txt', 'w').write('spooled ok')\nprint('hello from spool')\n"
    )
    bridge = HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SPOOL,
        instance=f"spool-{uuid.uuid4().hex[:10]}",
    )
    request = JobRequest(
        job_id=str(uuid.uuid4()), job_dir=str(tmp_path), script_name="train.py", memory_mb=256
    )
    result = bridge.submit(request)
    assert not (tmp_path / "stdout.txt").exists()
    done = wait_for(
        lambda: (job := bridge.find(request.job_id)) and job.state is JobState.COMPLETED and job,
        timeout=120,
        what="the spooled job to complete",
    )
    assert done.exit_code == 0
    bridge.retrieve(result.cluster_id, result.proc_id)
    assert (tmp_path / "outputs" / "result.txt").read_text() == "spooled ok"
    assert (tmp_path / "stdout.txt").read_text() == "hello from spool\n"
    # Once its outputs are home, the job leaves the queue for the history.
    gone = wait_for(
        lambda: (job := bridge.find(request.job_id)) and not job.in_queue and job,
        timeout=60,
        what="the retrieved job to leave the queue",
    )
    assert (gone.state, gone.exit_code) == (JobState.COMPLETED, 0)


def test_a_spooled_job_evicted_by_its_owner_resumes_from_the_checkpoint_htcondor_kept(
    tmp_path, pool_is_up
):
    from tests.helpers import OwnerAtDesk, copy_job_helpers
    from tests.lending.test_owner_returns import CHECKPOINTING, STEPS

    (tmp_path / "outputs").mkdir()
    # The helpers the portal stages: a GPU job runs under the launcher.
    copy_job_helpers(tmp_path)
    (tmp_path / "train.py").write_text(CHECKPOINTING)
    bridge = HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SPOOL,
        instance=f"spool-{uuid.uuid4().hex[:10]}",
    )
    # Without a shared file system HTCondor keeps only checkpoints the job made while it ran
    # (exit 85, then transfer_checkpoint_files); what it saves after SIGTERM is not sent back.
    # So the job checkpoints every 3 s here, and resumes from the last of those.
    request = JobRequest(
        job_id=str(uuid.uuid4()),
        job_dir=str(tmp_path),
        script_name="train.py",
        memory_mb=256,
        gpus=1,
        vacate_grace_s=30,
        checkpoint_interval_s=3,
    )
    result = bridge.submit(request)
    owner = OwnerAtDesk()
    try:
        running = wait_for(
            lambda: (
                (job := bridge.find(request.job_id))
                and job.state is JobState.RUNNING
                and job.workstation
                and job
            ),
            timeout=120,
            what="the spooled job to run",
        )
        time.sleep(8)  # a few interval checkpoints
        owner.returns_to(running.workstation)
        # The negotiator matches again every 2 s, so the job may be idle only briefly: a
        # second start tells of the eviction too.
        wait_for(
            lambda: (
                (job := bridge.find(request.job_id)).state is JobState.IDLE or job.num_starts >= 2
            ),
            timeout=120,
            what="the eviction",
        )
        owner.leave_all()
        done = wait_for(
            lambda: (
                (job := bridge.find(request.job_id)) and job.state is JobState.COMPLETED and job
            ),
            timeout=180,
            what="the resumed job to complete",
        )
    finally:
        owner.leave_all()
    assert done.exit_code == 0 and done.num_starts >= 2
    # The run after the eviction resumed: it took less than the whole workload (0.5 s a step).
    last_run_s = bridge.job_ad(request.job_id)["LastRemoteWallClockTime"]
    assert last_run_s < STEPS * 0.5, last_run_s
    bridge.retrieve(result.cluster_id, result.proc_id)
    # stdout travels with each checkpoint, so it holds every run's lines.
    stdout = (tmp_path / "stdout.txt").read_text()
    assert (
        max(int(line.split()[-1]) for line in stdout.splitlines() if line.startswith("resumed at"))
        > 0
    )
    metrics = job_metrics(tmp_path, tmp_path / ".nightshift" / "metrics.jsonl")
    assert [row["step"] for row in metrics.rows] == list(range(1, STEPS + 1))
