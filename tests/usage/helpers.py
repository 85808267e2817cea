"""A job that ran on the fake bridge and has been sampled and summarised."""

from datetime import UTC, datetime, timedelta

from condor_bridge import JobState as CondorState
from jobs import specs, submission, sync
from tests.conftest import script_upload
from usage import services

T0 = datetime(2026, 11, 2, 21, 0, tzinfo=UTC)


def finished_job(user, fake_bridge, *, gpus=2, memory_mb=8192, cpus=4, **figures):
    """A job that ran 30 minutes with the given figures (defaults: one of two GPUs busy at
    70 %, 1.5 GB of its 8 GB), sampled twice and summarised."""
    spec = specs.JobSpec(name="train", gpus=gpus, memory_mb=memory_mb, cpus=cpus)
    job = submission.job_submit(user=user, spec=spec, script=script_upload())
    job = submission.job_submit_to_pool(job.pk)
    job_id = str(job.public_id)
    fake_bridge.set_state(job_id, CondorState.RUNNING, at=T0)
    sync.jobs_sync()
    figures = {
        "cpus_used": 0.9,
        "memory_mb": 1400,
        "memory_peak_mb": 1536,
        "gpus_used": 0.7 if gpus else None,
        "gpu_memory_peak_mb": 6000 if gpus else None,
        "disk_mb": 40,
    } | figures
    fake_bridge.set_usage(job_id, **figures)
    services.usage_sample_running(now=T0 + timedelta(minutes=10))
    services.usage_sample_running(now=T0 + timedelta(minutes=20))
    fake_bridge.set_state(job_id, CondorState.COMPLETED, at=T0 + timedelta(minutes=30), exit_code=0)
    sync.jobs_sync()
    services.usage_summarise_finished(now=T0 + timedelta(minutes=31))
    job.refresh_from_db()
    return job


def running_job(user, fake_bridge, **figures):
    job = submission.job_submit(
        user=user, spec=specs.JobSpec(name="train", gpus=1), script=script_upload()
    )
    job = submission.job_submit_to_pool(job.pk)
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING, at=T0)
    sync.jobs_sync()
    fake_bridge.set_usage(str(job.public_id), **figures)
    services.usage_sample_running(now=T0 + timedelta(minutes=1))
    return job
