"""A job ad's usage figures, read exactly: units converted, unmeasured figures left None."""

from datetime import UTC, datetime

from condor_bridge import JobState
from condor_bridge.states import map_job_ad, map_usage_ad

STARTED = 1796158800


def test_a_running_jobs_figures_are_in_mb_and_cores():
    usage = map_usage_ad(
        {
            "NightshiftJobId": "j-1",
            "JobStatus": 2,
            "JobCurrentStartDate": STARTED,
            "RemoteHost": "slot1_1@ws-volta@vm",
            "RequestCpus": 4,
            "RequestMemory": 8192,
            "RequestDisk": 4194304,
            "RequestGPUs": 2,
            "CpusUsage": 1.5,
            "ResidentSetSize": 325000,
            "MemoryUsage": 318,
            "DiskUsage": 7500,
            "GPUsAverageUsage": 0.35,
            "GPUsMemoryUsage": 3100.0,
        },
        in_queue=True,
    )
    assert usage.workstation == "ws-volta" and usage.state is JobState.RUNNING
    assert usage.run_started_at == datetime.fromtimestamp(STARTED, tz=UTC)
    assert (
        usage.cpus_requested,
        usage.memory_requested_mb,
        usage.disk_requested_mb,
        usage.gpus_requested,
    ) == (4, 8192, 4096, 2)
    assert usage.memory_mb == 325000 / 1024 and usage.memory_peak_mb == 318
    assert usage.disk_mb == 7500 / 1024 and usage.cpus_used == 1.5
    assert (usage.gpus_used, usage.gpu_memory_peak_mb) == (0.35, 3100.0)


def test_newer_htcondors_gpus_usage_comes_before_the_older_name():
    ad = {"JobStatus": 2, "GPUsUsage": 0.8, "GPUsAverageUsage": 0.1}
    assert map_usage_ad(ad, in_queue=True).gpus_used == 0.8


def test_figures_htcondor_has_not_measured_are_none_not_zero():
    usage = map_usage_ad(
        {"JobStatus": 2, "ResidentSetSize": None, "CpusUsage": -1, "GPUsAverageUsage": True},
        in_queue=True,
    )
    assert (usage.memory_mb, usage.cpus_used, usage.gpus_used, usage.disk_mb) == (
        None,
        None,
        None,
        None,
    )


def test_a_finished_job_has_no_run_in_progress():
    usage = map_usage_ad(
        {"JobStatus": 4, "JobCurrentStartDate": STARTED, "MemoryUsage": 5}, in_queue=False
    )
    assert usage.run_started_at is None and usage.memory_peak_mb == 5


def test_only_a_held_job_carries_its_peak_memory_and_disk_in_mb_rounded_up():
    held = map_job_ad(
        {
            "JobStatus": 5,
            "HoldReasonCode": 21,
            "HoldReasonSubCode": 102,
            "ResidentSetSize": 307201,
            "DiskUsage": 1,
        },
        in_queue=True,
    )
    assert (held.held_memory_mb, held.held_disk_mb) == (301, 1)
    running = map_job_ad({"JobStatus": 2, "ResidentSetSize": 307201}, in_queue=True)
    assert running.held_memory_mb is None
