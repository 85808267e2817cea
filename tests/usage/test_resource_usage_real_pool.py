"""What jobs really use, measured on the personal pool: memory, the GPUs (HTCondor's GPU
monitor on ws-ampere, the job helper's nvidia-smi samples on ws-volta, whose startd does not
monitor its GPUs), their energy (the helper's power samples of the simulated cards), the
advice that follows, and a hold for exceeding memory explained."""

import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from jobs import specs, submission
from jobs.bridge import get_bridge
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.helpers import wait_for
from tests.pipeline import wait_for_state
from usage.models import JobUsageSummary, UsageSample

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]

# 300 MB touched page by page, so that all of it is resident, and held for a while.
MEMORY_HOG = """import time
blob = bytearray(300 * 1024 * 1024)
for i in range(0, len(blob), 4096):
    blob[i] = 1
print("holding 300 MB", flush=True)
time.sleep({seconds})
"""
# The simulated GPUs are told how hard the job works them (deploy/personal-pool/simulated-gpu).
GPU_LOAD = "/usr/bin/nightshift-simulated-gpu-load"


@pytest.fixture
def ada(client, transactional_db, settings):
    settings.USAGE_ADVICE_MIN_S = 5
    user = get_user_model().objects.create_user("ada", password="a-long-test-password")
    client.force_login(user)
    return user


def submit(user, body: str, **spec) -> Job:
    job = submission.job_submit(
        user=user, spec=specs.JobSpec(name="usage", **spec), script=script_upload(body)
    )
    return job


def busy_and_sampling(job: Job) -> tuple[float, float]:
    """How long the job kept its GPU load, by its own clock (it prints `busy FROM TO`), and
    the longest stretch between two of the helper's power samples: the energy, summed over
    those stretches, can be off by about one stretch at each end of the load. On a 2-core
    machine a stall of every process was seen to stretch both (a 14 s load held for 21 s,
    sampled 13 s apart), so the bounds follow what happened rather than the script's sleeps."""
    started, ended = map(float, (job.directory / "stdout.txt").read_text().split()[1:3])
    samples = (job.directory / ".nightshift" / "gpu-usage.jsonl").read_text().splitlines()
    moments = [json.loads(line)["time"] for line in samples if line.strip()]
    return ended - started, max(b - a for a, b in zip(moments, moments[1:]))


def summary_of(job: Job, timeout: float = 90) -> JobUsageSummary:
    return wait_for(
        lambda: JobUsageSummary.objects.filter(job=job).first(),
        timeout=timeout,
        what="the job's usage summary",
    )


def test_a_job_that_holds_300_mb_shows_that_peak_live_and_after_it_ends(ada, client, live_pipeline):
    job = submit(ada, MEMORY_HOG.format(seconds=12), memory_mb=2048)
    wait_for_state(job, {JobState.RUNNING}, timeout=120)
    live = wait_for(
        lambda: UsageSample.objects.filter(job=job, memory_peak_mb__gte=300).first(),
        timeout=60,
        what="a sample with the job's 300 MB",
    )
    assert live.memory_peak_mb < 400 and live.workstation
    body = client.get(reverse("usage:json", args=[job.public_id])).json()
    assert max(s["memory_peak_mb"] or 0 for s in body["runs"][0]["samples"]) >= 300
    wait_for_state(job, {JobState.COMPLETED}, timeout=120)
    summary = summary_of(job)
    assert 300 <= summary.memory_peak_mb < 400
    assert summary.memory_requested_mb == 2048 and summary.measured_s >= 10
    page = client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert re.search(r"peak 3\d\d MB of the 2048 MB asked for", page)
    # 2 GB asked for, about 300 MB used: a request that fits is suggested, with a clone.
    assert "You asked for 2 GB of memory; the peak was" in page
    assert "1 GB would do." in page
    assert f"?from={job.public_id}&amp;memory_gb=1" in page


def test_a_gpu_job_on_a_monitored_workstation_shows_htcondors_gpu_figures(ada, live_pipeline):
    # 40 GB of GPU memory: only ws-ampere's A100, whose startd runs the GPU monitor.
    body = (
        f"import subprocess, time\nsubprocess.run([{GPU_LOAD!r}, '--utilization', '35', "
        "'--memory-mb', '3100'], check=True)\nstarted = time.time()\ntime.sleep(20)\n"
        "print('busy', started, time.time(), flush=True)\n"
    )
    job = submit(ada, body, gpus=1, gpu_memory_gb=40)
    wait_for_state(job, {JobState.COMPLETED}, timeout=150)
    summary = summary_of(job)
    assert summary.gpu_source == "htcondor"
    # The run's average: it climbs towards 35 % from the monitor's first readings, some of
    # which come before the job has set its load.
    assert 0.15 <= summary.gpu_utilization <= 0.36
    assert summary.gpu_memory_peak_mb == 3100
    assert summary.gpu_hours > 0
    job.refresh_from_db()
    assert job.workstation == "ws-ampere"
    # The helper's power samples: the simulated A100 draws 55 W idle (the kit says so) and
    # 55 + 35 % of the 345 W to its 400 W at this load, for the 20 s it holds it.
    joules = summary.gpu_energy_kwh * 3.6e6
    busy_s, stretch_s = busy_and_sampling(job)
    assert 0.35 * 345 * (busy_s - 2 * stretch_s) <= joules, (joules, busy_s, stretch_s)
    assert joules <= 0.35 * 345 * (busy_s + 2 * stretch_s), (joules, busy_s, stretch_s)
    assert summary.energy_simulated and not summary.energy_idle_estimated


def test_two_gpus_with_one_busy_half_the_time_earn_advice_from_the_helpers_samples(
    ada, client, live_pipeline
):
    # ws-volta's two V100s: its startd runs no GPU monitor, so the job helper samples the
    # (simulated) nvidia-smi every 2 s (the pool's NIGHTSHIFT_GPU_SAMPLE_SECONDS). One GPU
    # works at 80 % for 14 s, then nothing does.
    body = (
        f"import subprocess, time\nsubprocess.run([{GPU_LOAD!r}, '--utilization', '80', "
        "'--memory-mb', '5000', '--devices', '1'], check=True)\nstarted = time.time()\n"
        f"time.sleep(14)\nsubprocess.run([{GPU_LOAD!r}, '--utilization', '0', '--memory-mb', "
        "'0'], check=True)\nprint('busy', started, time.time(), flush=True)\ntime.sleep(14)\n"
    )
    job = submit(ada, body, gpus=2)
    wait_for_state(job, {JobState.COMPLETED}, timeout=150)
    summary = summary_of(job)
    job.refresh_from_db()
    assert job.workstation == "ws-volta"
    assert summary.gpu_source == "helper"
    assert summary.gpus_active == 1
    assert summary.gpu_memory_peak_mb == 5000
    assert 0.25 <= summary.gpu_idle_share <= 0.8
    # One simulated V100 at 80 % of the 215 W between its 35 W idle and 250 W, for the 14 s
    # the job holds it; no idle draw from the kit here, so the least the samples saw (idle)
    # stands in.
    joules = summary.gpu_energy_kwh * 3.6e6
    busy_s, stretch_s = busy_and_sampling(job)
    assert 0.8 * 215 * (busy_s - 2 * stretch_s) <= joules, (joules, busy_s, stretch_s)
    assert joules <= 0.8 * 215 * (busy_s + 2 * stretch_s), (joules, busy_s, stretch_s)
    assert summary.energy_simulated and summary.energy_idle_estimated
    page = client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert "You asked for 2 GPUs and used 1, at" in page
    assert "The GPU was idle" in page and "is data loading the bottleneck?" in page
    assert f"?from={job.public_id}&amp;gpus=1" in page


def test_a_job_over_its_memory_is_held_and_the_hold_gives_its_peak_and_a_request_that_fits(
    ada, client, live_pipeline
):
    job = submit(ada, MEMORY_HOG.format(seconds=60), memory_mb=256)
    wait_for_state(job, {JobState.HELD}, timeout=150)
    job.refresh_from_db()
    assert (job.hold_reason_code, job.hold_reason_subcode) == (21, 102)
    assert job.hold_memory_mb > 256
    page = client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert re.search(
        r"It used more memory than it asked for: \d{3} MB at its peak, against "
        r"the 256 MB it asked for\.",
        page,
    )
    assert "Submit again asking for" in page
    clone = re.search(r'data-role="hold-clone" href="([^"]+)"', page).group(1)
    assert clone.startswith(reverse("jobs:new")) and "memory_gb=" in clone
    form = client.get(clone.replace("&amp;", "&")).context["form"]
    assert form.initial["memory_gb"] * 1024 > job.hold_memory_mb
    get_bridge().act("remove", job.cluster_id, job.proc_id, reason="test done")
