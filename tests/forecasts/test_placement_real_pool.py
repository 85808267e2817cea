"""Placement on the personal pool: the workstations publish their chances of staying free
(as the execute-node kit's cron would), and the negotiator puts a long job on the one most
likely to stay free for its runtime. Swap the figures and the next long job goes to the
other workstation: the job's rank decides, not the pool's own preferences."""

import uuid

import pytest
from django.conf import settings

from condor_bridge import FileMode, JobRequest, JobState
from condor_bridge.placement import STAY_FREE_HOURS, attribute
from condor_bridge.schedd import HTCondorBridge
from tests.helpers import copy_job_helpers, pool_command, pool_config, wait_for

pytestmark = [pytest.mark.condor, pytest.mark.timeout(600)]

DURABLE = {2: 0.99, 4: 0.97, 8: 0.93, 16: 0.88, 24: 0.7}
FLAKY = {2: 0.95, 4: 0.5, 8: 0.2, 16: 0.05, 24: 0.01}
CONFIG = "61-placement-test.conf"
# The GPU workstations a one-GPU job matches (ws-office has no GPU).
LOCAL_NAMES = {"ws-ampere": "AMPERE", "ws-volta": "VOLTA", "ws-fermi": "FERMI"}


def publish(figures: dict[str, dict[int, float]]) -> None:
    names = " ".join(attribute(hours) for hours in STAY_FREE_HOURS)
    lines = [f"STARTD_ATTRS = $(STARTD_ATTRS) {names}"]
    for workstation, published in figures.items():
        local = LOCAL_NAMES[workstation]
        lines += [f"{local}.{attribute(h)} = {p:.3f}" for h, p in published.items()]
    pool_config("\n".join(lines) + "\n", name=CONFIG)

    def shown() -> bool:
        out = pool_command("condor_status", "-af", "Name", attribute(16)).stdout
        seen = {}
        for line in out.splitlines():
            name, value = line.split()
            # Each workstation's partitionable slot, which new jobs are matched to (a
            # dynamic slot that a claim keeps may still show older figures).
            if value != "undefined" and name.startswith("slot1@"):
                seen[name.split("@")[1]] = float(value)  # slot1@ws-volta@vm
        return all(
            abs(seen.get(workstation, -1) - published[16]) < 1e-6
            for workstation, published in figures.items()
        )

    wait_for(shown, timeout=90, what="the collector to show the published figures")


@pytest.fixture
def bridge():
    yield HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SPOOL,
        instance=f"placement-{uuid.uuid4().hex[:10]}",
    )
    pool_config(None, name=CONFIG)


def run_long_job(bridge, folder) -> str:
    folder.mkdir()
    (folder / "outputs").mkdir()
    copy_job_helpers(folder)
    (folder / "train.py").write_text("import time\ntime.sleep(600)\n")
    request = JobRequest(
        job_id=str(uuid.uuid4()),
        job_dir=str(folder),
        script_name="train.py",
        memory_mb=256,
        gpus=1,
        max_runtime_s=10 * 3600,
    )
    result = bridge.submit(request)
    running = wait_for(
        lambda: (
            (job := bridge.find(request.job_id))
            and job.state is JobState.RUNNING
            and job.workstation
            and job
        ),
        timeout=180,
        what="the long job to start",
    )
    bridge.act("remove", result.cluster_id, result.proc_id, reason="placement test done")
    return running.workstation


def test_a_long_job_goes_where_it_is_likely_to_run_longest(bridge, tmp_path, pool_is_up):
    # ws-volta stays the flaky one: the deadline tests' two-GPU jobs run there, and a claim
    # that one of them leaves idle for a while keeps it out of any match.
    publish({"ws-ampere": FLAKY, "ws-volta": FLAKY, "ws-fermi": DURABLE})
    assert run_long_job(bridge, tmp_path / "first") == "ws-fermi"
    publish({"ws-ampere": DURABLE, "ws-volta": FLAKY, "ws-fermi": FLAKY})
    assert run_long_job(bridge, tmp_path / "second") == "ws-ampere"
