"""A job's deadline reaches HTCondor's ad as its job priority (earlier deadlines first among
the user's jobs) and as NightshiftFinishBy."""

import uuid

import pytest
from django.conf import settings

from condor_bridge import FileMode, JobRequest
from condor_bridge.schedd import HTCondorBridge
from condor_bridge.submit import DEADLINE_PRIORITY_BASE
from tests.helpers import copy_job_helpers

pytestmark = [pytest.mark.condor, pytest.mark.timeout(120)]

FRIDAY = 1_796_482_800  # 2026-12-04 16:00 UTC


def test_the_deadline_is_the_jobs_priority_in_the_schedd(tmp_path, pool_is_up):
    bridge = HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR, token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SPOOL, instance=f"deadline-{uuid.uuid4().hex[:10]}",
    )  # fmt: skip
    (tmp_path / "outputs").mkdir()
    copy_job_helpers(tmp_path)
    (tmp_path / "train.py").write_text("print('done')\n")
    request = JobRequest(job_id=str(uuid.uuid4()), job_dir=str(tmp_path), script_name="train.py",
                         memory_mb=128, finish_by_s=FRIDAY, gpus=0)  # fmt: skip
    submitted = bridge.submit(request)
    try:
        ad = bridge.job_ad(request.job_id)
        assert ad["JobPrio"] == DEADLINE_PRIORITY_BASE - FRIDAY // 60
        assert ad["NightshiftFinishBy"] == FRIDAY
    finally:
        bridge.act("remove", submitted.cluster_id, submitted.proc_id, reason="test done")
