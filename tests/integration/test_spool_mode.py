"""Spool mode: no shared file system; inputs are spooled and outputs retrieved."""

import uuid

import pytest
from django.conf import settings

from condor_bridge import FileMode, JobRequest, JobState
from condor_bridge.schedd import HTCondorBridge
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
        collector=settings.CONDOR_COLLECTOR, token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SPOOL, instance=f"spool-{uuid.uuid4().hex[:10]}",
    )  # fmt: skip
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
