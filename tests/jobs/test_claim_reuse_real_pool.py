"""The schedd hands a finished or removed job's claim, slot and all, to the same submitter's
next idle job that fits it. A job that asks for no GPU must not be handed a slot holding one:
it would keep that GPU from every GPU job for as long as it ran, and be charged for it."""

import uuid

import pytest
from django.conf import settings

from condor_bridge import FileMode, JobRequest, JobState
from tests.helpers import make_job_dir, owners_present, wait_for

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]

SLEEPS = "import time\ntime.sleep(600)\n"
# ws-volta alone takes jobs: two GPUs and four CPUs.
OTHER_DESKS = ("ws-ampere", "ws-fermi", "ws-office")


@pytest.fixture
def bridge():
    from condor_bridge.schedd import HTCondorBridge

    real = HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SHARED,
        instance=f"reuse-{uuid.uuid4().hex[:12]}",
    )
    yield real
    for job in real.active_jobs():
        real.act("remove", job.cluster_id, job.proc_id, reason="claim reuse test cleanup")


def request(user: str, **fields) -> JobRequest:
    job_id, directory = make_job_dir(settings.JOBS_DIR, SLEEPS, uid=settings.JOB_DIR_UID)
    return JobRequest(
        job_id=job_id,
        job_dir=str(directory),
        script_name="train.py",
        memory_mb=256,
        accounting_user=user,
        **fields,
    )


def running(bridge, job_id):
    return wait_for(
        lambda: (job := bridge.find(job_id)) and job.state is JobState.RUNNING and job,
        timeout=120,
        what="the job to run",
    )


def test_a_cpu_job_waiting_behind_a_gpu_job_gets_a_slot_of_its_own_without_the_gpu(bridge, desks):
    for desk in OTHER_DESKS:
        desks.returns_to(desk)
    wait_for(
        lambda: owners_present() >= set(OTHER_DESKS),
        timeout=60,
        what="the owners back at every desk but ws-volta's",
    )
    # An earlier test's job still running there would leave the GPU job no room.
    wait_for(
        lambda: any(
            m.name == "ws-volta" and (m.free_cpus, m.free_gpus) == (4, 2)
            for m in bridge.pool_machines()
        ),
        timeout=120,
        what="ws-volta free of other jobs",
    )
    user = f"reuse-{uuid.uuid4().hex[:8]}"
    # All of ws-volta's CPUs and one of its GPUs: nothing is left for another job to start.
    gpu_job = request(user, gpus=1, cpus=4)
    bridge.submit(gpu_job)
    gpu_run = running(bridge, gpu_job.job_id)
    assert (gpu_run.workstation, gpu_run.gpus_assigned) == ("ws-volta", 1)
    # HTCondor's own GPU clause is still there: naming the slot's GPUs in the requirement
    # would have made the submission leave it out.
    assert "TARGET.GPUs >= RequestGPUs" in str(bridge.job_ad(gpu_job.job_id)["Requirements"])
    cpu_job = request(user, cpus=1)
    bridge.submit(cpu_job)
    wait_for(
        lambda: bridge.find(cpu_job.job_id).state is JobState.IDLE,
        timeout=30,
        what="the CPU job to wait",
    )
    bridge.act("remove", gpu_run.cluster_id, gpu_run.proc_id, reason="finished")
    cpu_run = running(bridge, cpu_job.job_id)
    assert cpu_run.workstation == "ws-volta"
    ad = bridge.job_ad(cpu_job.job_id)
    assert ad.get("GPUsProvisioned", 0) == 0, ad.get("AssignedGPUs")
    assert not ad.get("AssignedGPUs")
