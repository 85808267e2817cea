"""Everything that writes usage samples and summaries.

One beat task samples every running job in one schedd query, then summarises the jobs that
ended since, in one history call. The sync never waits for any of it.
"""

from __future__ import annotations

import json
import logging
import math
import uuid
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounting.models import UsageRecord
from accounting.services import usage_record_energy_set
from condor_bridge import JobUsage
from condor_bridge.submit import HELPER_DIR
from jobs.models import FINAL_STATES, Job
from jobs.selectors import open_job_file
from jobs.services import get_bridge, raise_unless_one_answered, schedds_ask, schedds_in_use

from .advice import GPU_ACTIVE
from .energy import Energy, PowerRow, energy_of_run, power_row
from .models import JobUsageSummary, UsageSample

logger = logging.getLogger(__name__)

# The job helper's nvidia-smi samples (jobs/runtime/launch.py), where the workstation's
# startd does not monitor its GPUs.
GPU_SAMPLES = f"{HELPER_DIR}/gpu-usage.jsonl"
# Only the end of it is read at each sampling: what was written since the last sample.
GPU_SAMPLES_TAIL_BYTES = 64 * 1024
# Once the job has ended, all of it, for its energy (the helper stops writing at 20 MB).
GPU_SAMPLES_MOST_BYTES = 21 * 1024 * 1024
# A run's last samples may be written shortly after HTCondor saw it end.
RUN_END_SLACK_S = 30.0
# Jobs that ended longer ago than this, and whose final ad never came, are summarised from
# their samples alone.
FINAL_AD_PATIENCE = timedelta(minutes=10)
SUMMARISE_BATCH = 200
SUMMARISE_HORIZON = timedelta(days=7)


def usage_sample(*, now: datetime | None = None) -> tuple[int, int]:
    """One sampling cycle: (samples taken of running jobs, jobs summarised)."""
    return usage_sample_running(now=now), usage_summarise_finished(now=now)


def usage_sample_running(*, now: datetime | None = None) -> int:
    """Sample what every running job uses now, in one query to the schedd and a few to the
    database; returns how many samples were written."""
    now = now or timezone.now()
    answers, failures = schedds_ask(schedds_in_use(), lambda name: get_bridge(name).running_usage())
    raise_unless_one_answered(failures, answers)
    measured = {
        usage.job_id: usage
        for found in answers.values()
        for usage in found
        if _is_uuid(usage.job_id)
    }
    if not measured:
        return 0
    jobs = list(
        Job.objects.filter(public_id__in=list(measured))
        .exclude(state__in=FINAL_STATES)
        .only("pk", "public_id", "gpus", "output_dir")
    )
    latest = _latest_samples([job.pk for job in jobs])
    samples = []
    for job in jobs:
        usage = measured[str(job.public_id)]
        previous = latest.get(job.pk)
        samples.append(_sample(job, usage, previous, now=now))
    UsageSample.objects.bulk_create(samples, batch_size=1000)
    return len(samples)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _latest_samples(job_pks: list[int]) -> dict[int, UsageSample]:
    if not job_pks:
        return {}
    rows = (
        UsageSample.objects.filter(job_id__in=job_pks)
        .order_by("job_id", "-taken_at")
        .distinct("job_id")
    )
    return {sample.job_id: sample for sample in rows}


def _sample(
    job: Job, usage: JobUsage, previous: UsageSample | None, *, now: datetime, final: bool = False
) -> UsageSample:
    run_started_at = usage.run_started_at or (previous.run_started_at if previous else None)
    run_started_at = run_started_at or job.started_at or now
    same_run = previous is not None and previous.run_started_at == run_started_at
    sample = UsageSample(
        job=job,
        run_started_at=run_started_at,
        workstation=usage.workstation,
        taken_at=now,
        cpus=usage.cpus_used,
        memory_mb=usage.memory_mb,
        memory_peak_mb=usage.memory_peak_mb,
        disk_mb=usage.disk_mb,
        final=final,
    )
    gpus = usage.gpus_requested or job.gpus
    if not gpus:
        return sample
    if usage.gpus_used is not None:
        sample.gpu_source = UsageSample.GpuSource.HTCONDOR
        sample.gpus_busy = usage.gpus_used
        sample.gpu_memory_mb = usage.gpu_memory_peak_mb
        sample.gpu_utilization = _interval_utilisation(
            usage.gpus_used, gpus, run_started_at, now, previous if same_run else None
        )
        return sample
    since = previous.taken_at if same_run else run_started_at
    helper = helper_gpu_samples(job, since=since)
    if helper:
        sample.gpu_source = UsageSample.GpuSource.HELPER
        sample.gpu_utilization = helper.utilisation(gpus)
        sample.gpus_active = helper.active_devices
        sample.gpu_memory_mb = helper.memory_peak_mb
    return sample


def _interval_utilisation(
    gpus_busy: float, gpus: int, run_started_at: datetime, now: datetime, previous
) -> float:
    """How busy each GPU was since the previous sample, from HTCondor's run averages: the
    average times the run's length is the GPU-seconds of work done so far."""
    elapsed = max((now - run_started_at).total_seconds(), 0.0)
    if previous is None or previous.gpus_busy is None:
        return _clamp(gpus_busy / gpus)
    before = max((previous.taken_at - run_started_at).total_seconds(), 0.0)
    if elapsed - before < 1:
        return _clamp(gpus_busy / gpus)
    work = gpus_busy * elapsed - previous.gpus_busy * before
    return _clamp(work / (elapsed - before) / gpus)


def _clamp(value: float) -> float:
    if not math.isfinite(value):
        return 0.0  # the job writes the helper's file: NaN and infinity read as nothing
    return min(max(value, 0.0), 1.0)


class HelperSamples:
    """What the job helper's nvidia-smi samples say about a stretch of time."""

    def __init__(self, rows: list[dict]) -> None:
        per_device: dict[str, list[float]] = defaultdict(list)
        self.memory_peak_mb = 0.0
        for row in rows:
            for device in row["devices"]:
                per_device[device["uuid"]].append(device["utilization"])
                self.memory_peak_mb = max(self.memory_peak_mb, device["memory_mb"])
        self.means = {name: sum(values) / len(values) for name, values in per_device.items()}
        self.active_devices = sum(1 for mean in self.means.values() if mean >= GPU_ACTIVE)

    def __bool__(self) -> bool:
        return bool(self.means)

    def utilisation(self, gpus: int) -> float:
        """Busy share per GPU the job was given (a device never seen counts as idle)."""
        return _clamp(sum(self.means.values()) / max(gpus, len(self.means)))


def helper_gpu_samples(job: Job, *, since: datetime) -> HelperSamples | None:
    """The helper's samples newer than `since`, where the portal sees the job's folder. The
    job writes this file, so every line is checked and a broken one skipped."""
    raw = open_job_file(job.directory, job.directory / GPU_SAMPLES)
    if raw is None:
        return None
    with raw:
        size = raw.seek(0, 2)
        raw.seek(max(size - GPU_SAMPLES_TAIL_BYTES, 0))
        lines = raw.read(GPU_SAMPLES_TAIL_BYTES).splitlines()
    cutoff = since.timestamp()
    rows = [row for row in map(_helper_row, lines) if row is not None and row["time"] > cutoff]
    return HelperSamples(rows) if rows else None


def _helper_row(line: bytes) -> dict | None:
    try:
        data = json.loads(line)
        moment = float(data["time"])
        devices = [
            {
                "uuid": str(device["uuid"])[:100],
                "utilization": _clamp(float(device["utilization"])),
                "memory_mb": _finite(float(device["memory_mb"])),
            }
            for device in data["devices"][:16]
        ]
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if not (math.isfinite(moment) and 0 < moment < 1e11):
        return None
    return {"time": moment, "devices": devices}


def _finite(value: float) -> float:
    return value if math.isfinite(value) and value > 0 else 0.0


# -- once a job has ended ------------------------------------------------------------------


def usage_summarise_finished(*, now: datetime | None = None) -> int:
    """Summarise the jobs that ended and have no summary yet, from their samples and their
    final ads (one history call); returns how many were summarised."""
    now = now or timezone.now()
    jobs = list(
        Job.objects.filter(
            state__in=FINAL_STATES,
            usage_summary__isnull=True,
            finished_at__gte=now - SUMMARISE_HORIZON,
            started_at__isnull=False,
        ).order_by("finished_at")[:SUMMARISE_BATCH]
    )
    if not jobs:
        return 0
    submitted: dict[str, list[str]] = defaultdict(list)
    for job in jobs:
        if job.cluster_id is not None:
            submitted[job.schedd].append(str(job.public_id))
    answers, failures = schedds_ask(
        submitted, lambda name: get_bridge(name).finished_usage(submitted[name])
    )
    raise_unless_one_answered(failures, answers)
    finals = {usage.job_id: usage for found in answers.values() for usage in found}
    # A job whose schedd did not answer waits for its final ad, however long it has ended.
    jobs = [job for job in jobs if job.schedd not in failures]
    latest = _latest_samples([job.pk for job in jobs])
    done = 0
    for job in jobs:
        final = finals.get(str(job.public_id))
        if final is None and job.finished_at and now - job.finished_at < FINAL_AD_PATIENCE:
            continue  # its final ad may not be in the history yet
        with transaction.atomic():
            if final is not None:
                # Dated when the job ended: the stretch it covers ends there.
                ended = job.finished_at or now
                _sample(job, final, latest.get(job.pk), now=ended, final=True).save()
            usage_summarise(job, ended_at=job.finished_at or now)
        done += 1
    return done


def usage_summarise(job: Job, *, ended_at: datetime) -> JobUsageSummary:
    """Write (or rewrite) the job's summary from its samples and its usage records."""
    samples = list(job.usage_samples.order_by("taken_at", "id"))
    runs = list(UsageRecord.objects.filter(job=job).order_by("started_at"))
    figures = summarise(samples, runs, gpus=job.gpus, ended_at=ended_at)
    energy = job_energy(job, runs, ended_at=ended_at) if job.gpus else None
    summary, _ = JobUsageSummary.objects.update_or_create(
        job=job,
        defaults={
            "user_id": job.owner_id,
            "lab_id": job.lab_id,
            "ended_at": ended_at,
            "cpus_requested": job.request.get("cpus", 1),
            "memory_requested_mb": job.request.get("memory_mb", 0),
            "disk_requested_mb": job.request.get("disk_mb", 0),
            "gpus_requested": job.gpus,
            **figures,
            "gpu_energy_kwh": energy.kwh if energy else None,
            "co2e_kg": energy.co2e_kg if energy else None,
            "energy_simulated": bool(energy and energy.simulated),
            "energy_idle_estimated": bool(energy and energy.idle_estimated),
        },
    )
    return summary


def job_energy(job: Job, runs: list[UsageRecord], *, ended_at: datetime) -> Energy | None:
    """The job's GPU energy above idle from the helper's power samples, recorded on each of
    its runs; None where no run has any."""
    rows = helper_power_rows(job)
    if not rows:
        return None
    total = None
    for position, record in enumerate(runs):
        start = record.started_at.timestamp()
        end = (record.ended_at or ended_at).timestamp() + RUN_END_SLACK_S
        if position + 1 < len(runs):
            end = min(end, runs[position + 1].started_at.timestamp())
        energy = energy_of_run([row for row in rows if start <= row.time < end], grid_intensity)
        if energy is None:
            continue
        usage_record_energy_set(
            record, kwh=energy.kwh, co2e_kg=energy.co2e_kg, simulated=energy.simulated
        )
        total = energy if total is None else total + energy
    return total


def grid_intensity(moment: datetime) -> float | None:
    """The site's g CO2e per kWh at that moment, or None where it set none."""
    intensity = settings.GRID_INTENSITY
    return intensity.at(moment, ZoneInfo(settings.TIME_ZONE)) if intensity else None


def helper_power_rows(job: Job) -> list[PowerRow]:
    """Every power reading in the helper's file, where the portal sees the job's folder."""
    raw = open_job_file(job.directory, job.directory / GPU_SAMPLES)
    if raw is None:
        return []
    with raw:
        lines = raw.read(GPU_SAMPLES_MOST_BYTES).splitlines()
    rows = []
    for line in lines:
        try:
            row = power_row(json.loads(line))
        except (ValueError, RecursionError):
            continue  # a line the job broke, or nested past reading
        if row is not None:
            rows.append(row)
    return rows


def summarise(
    samples: list[UsageSample], runs: Iterable[UsageRecord], *, gpus: int, ended_at: datetime
) -> dict:
    """The summary's figures: peaks are the highest seen; averages weigh each run by how
    long it ran; the GPUs' idle share counts the stretches between samples they did nothing."""
    by_run: dict[datetime, list[UsageSample]] = defaultdict(list)
    for sample in samples:
        by_run[sample.run_started_at].append(sample)
    lengths = {record.started_at: record.wall.total_seconds() for record in runs}
    gpu_hours = sum(record.gpu_hours(until=ended_at) for record in runs)
    cpu_work = cpu_time = gpu_work = gpu_time = idle_time = intervals_time = 0.0
    for started_at, run in by_run.items():
        length = lengths.get(started_at) or max(
            (run[-1].taken_at - started_at).total_seconds(), 0.0
        )
        cpus = [s.cpus for s in run if s.cpus is not None]
        if cpus:
            cpu_work += cpus[-1] * length
            cpu_time += length
        condor = [s.gpus_busy for s in run if s.gpus_busy is not None]
        if gpus and condor:
            gpu_work += _clamp(condor[-1] / gpus) * length
            gpu_time += length
        elif gpus:
            interval = _utilisation_intervals(run, started_at)
            gpu_work += sum(value * seconds for value, seconds in interval)
            gpu_time += sum(seconds for _, seconds in interval)
        for value, seconds in _utilisation_intervals(run, started_at):
            intervals_time += seconds
            if value < GPU_ACTIVE:
                idle_time += seconds
    gpu_utilization = gpu_work / gpu_time if gpu_time else None
    sources = {s.gpu_source for s in samples if s.gpu_source}
    return {
        "samples": len(samples),
        "measured_s": sum(lengths.values()) or cpu_time or gpu_time,
        "cpus_used": cpu_work / cpu_time if cpu_time else None,
        "memory_peak_mb": _highest(s.memory_peak_mb or s.memory_mb for s in samples),
        "disk_peak_mb": _highest(s.disk_mb for s in samples),
        "gpu_utilization": gpu_utilization,
        "gpus_active": _highest(s.gpus_active for s in samples),
        # Too few stretches between samples say nothing about idle time.
        "gpu_idle_share": idle_time / intervals_time
        if intervals_time and sum(1 for s in samples if s.gpu_utilization is not None) >= 3
        else None,
        "gpu_memory_peak_mb": _highest(s.gpu_memory_mb for s in samples),
        # HTCondor's figures, where a run had any, are the ones its averages come from.
        "gpu_source": UsageSample.GpuSource.HTCONDOR
        if UsageSample.GpuSource.HTCONDOR in sources
        else next(iter(sources), ""),
        "gpu_hours": gpu_hours,
        "idle_gpu_hours": gpu_hours * (1 - gpu_utilization) if gpu_utilization is not None else 0,
    }


def _utilisation_intervals(run: list[UsageSample], started_at: datetime) -> list:
    """(utilisation, seconds) for each stretch a sample covers: since the sample before it."""
    stretches = []
    before = started_at
    for sample in run:
        seconds = max((sample.taken_at - before).total_seconds(), 0.0)
        if sample.gpu_utilization is not None and seconds > 0:
            stretches.append((sample.gpu_utilization, seconds))
        before = sample.taken_at
    return stretches


def _highest(values: Iterable[float | int | None]):
    present = [value for value in values if value is not None]
    return max(present) if present else None


def usage_purge_samples(*, older_than: timedelta, now: datetime | None = None) -> int:
    """Delete the samples of jobs summarised longer ago than `older_than` (their summaries
    stay, and with them the reports)."""
    cutoff = (now or timezone.now()) - older_than
    deleted, _ = UsageSample.objects.filter(job__usage_summary__ended_at__lt=cutoff).delete()
    return deleted
