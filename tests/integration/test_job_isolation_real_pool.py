"""One student's running job against another's, on the personal pool: each job has its own
PID namespace, its own /tmp and its own /dev/shm (deploy/personal-pool/pool turns them on
where the kernel allows it), so a hostile job sees no other job's processes, reads no other
job's environment (where a notebook's token would be) and finds none of its temporary or
shared-memory files.

What does not hold yet is in docs/security.md: every job still runs as one Unix account,
so job folders and live ports are reachable from another job."""

import json
import uuid

import pytest
from django.conf import settings

from condor_bridge import FileMode, JobRequest, JobState
from condor_bridge.schedd import HTCondorBridge
from tests.helpers import POOL_ROOT, make_job_dir, wait_for

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]

SECRET = f"victim-secret-{uuid.uuid4().hex}"
VICTIM = """
import time
open("/tmp/victim-was-here", "w").write("mine")
open("/dev/shm/victim-was-here", "w").write("mine")
print("started", flush=True)
time.sleep(240)
"""
HOSTILE = """
import json, os
found, visible = [], 0
for name in os.listdir("/proc"):
    if not name.isdigit():
        continue
    visible += 1
    try:
        with open(f"/proc/{name}/environ", "rb") as environ:
            if SECRET.encode() in environ.read():
                found.append(name)
    except OSError:
        pass
print(json.dumps({"processes": visible, "secret_in": found,
                  "victim_tmp": os.path.exists("/tmp/victim-was-here"),
                  "victim_shm": os.path.exists("/dev/shm/victim-was-here")}))
"""


ISOLATION = POOL_ROOT / "etc/condor/config.d/51-nightshift-isolation.conf"


def isolation_on() -> bool:
    return "USE_PID_NAMESPACES = True" in ISOLATION.read_text()


def private_tmp() -> bool:
    """Each job has its own /tmp, unless the jobs' folders are under /tmp (a checkout
    there), where the pool leaves /tmp shared so as not to hide them."""
    for line in ISOLATION.read_text().splitlines():
        name, _, value = line.partition("=")
        if name.strip() == "MOUNT_UNDER_SCRATCH":
            return "/tmp" in [part.strip(' "') for part in value.split(",")]
    return False


@pytest.fixture
def bridge():
    real = HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SHARED,
        instance=f"isolation-{uuid.uuid4().hex[:12]}",
    )
    yield real
    for job in real.active_jobs():
        real.act("remove", job.cluster_id, job.proc_id, reason="isolation test cleanup")


def submit(bridge, script: str, student: str, **fields) -> tuple[JobRequest, object]:
    job_id, directory = make_job_dir(settings.JOBS_DIR, script, uid=settings.JOB_DIR_UID)
    request = JobRequest(
        job_id=job_id,
        job_dir=str(directory),
        script_name="train.py",
        memory_mb=128,
        accounting_user=student,
        **fields,
    )
    bridge.submit(request)
    return request, directory


def test_a_hostile_job_sees_no_other_jobs_processes_environment_tmp_or_shared_memory(bridge):
    if not isolation_on():
        pytest.skip("this machine refuses PID and mount namespaces in the pool's root")
    victim, victim_dir = submit(bridge, VICTIM, "victim", environment=(("TOKEN", SECRET),))
    wait_for(
        lambda: (
            (victim_dir / "stdout.txt").exists()
            and "started" in (victim_dir / "stdout.txt").read_text()
        ),
        timeout=120,
        what="the victim's job to start",
    )
    hostile, hostile_dir = submit(bridge, f"SECRET = {SECRET!r}\n{HOSTILE}", "mallory")
    done = wait_for(
        lambda: (job := bridge.find(hostile.job_id)) and job.state is JobState.COMPLETED and job,
        timeout=120,
        what="the hostile job to end",
    )
    assert done.exit_code == 0, (hostile_dir / "stderr.txt").read_text()
    seen = json.loads((hostile_dir / "stdout.txt").read_text())
    assert bridge.find(victim.job_id).state is JobState.RUNNING  # they ran side by side
    assert seen["secret_in"] == []
    if private_tmp():
        assert seen["victim_tmp"] is False
    assert seen["victim_shm"] is False  # each job's /dev/shm is a tmpfs of its own
    # Its own few processes (HTCondor's init of the namespace, python), nobody else's.
    assert seen["processes"] <= 5, seen
