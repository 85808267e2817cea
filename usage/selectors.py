"""Reads of what jobs used: a job's samples by run, its summary and the advice it earns."""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.urls import reverse

from jobs.models import Job

from .advice import advise, clone_adjustments, gpus_used
from .energy import energy_text as energy_text
from .models import JobUsageSummary, UsageSample

SAMPLE_FIELDS = (
    "cpus",
    "memory_mb",
    "memory_peak_mb",
    "disk_mb",
    "gpu_utilization",
    "gpus_busy",
    "gpus_active",
    "gpu_memory_mb",
)
MAX_SAMPLES = 2000


def job_summary(job: Job) -> JobUsageSummary | None:
    try:
        return job.usage_summary
    except JobUsageSummary.DoesNotExist:
        return None


def job_samples(job: Job, *, limit: int = MAX_SAMPLES) -> list[UsageSample]:
    """The job's samples, oldest first, evenly thinned to at most `limit` (a run's first and
    last are always kept)."""
    samples = list(job.usage_samples.order_by("taken_at", "id"))
    if len(samples) <= limit:
        return samples
    step = len(samples) / limit
    kept = {int(i * step) for i in range(limit)} | {len(samples) - 1}
    return [sample for index, sample in enumerate(samples) if index in kept]


def job_clone_url(job: Job, adjust: dict) -> str:
    if not adjust:
        return ""
    values = {
        name: f"{value:g}" if isinstance(value, float) else value for name, value in adjust.items()
    }
    return f"{reverse('jobs:new')}?{urlencode({'from': str(job.public_id), **values})}"


def job_usage_payload(job: Job) -> dict:
    """Everything the job page's usage section, the API and the CLI show."""
    runs: dict = {}
    for sample in job_samples(job):
        run = runs.setdefault(
            sample.run_started_at,
            {
                "started_at": sample.run_started_at.isoformat(),
                "workstation": sample.workstation,
                "samples": [],
            },
        )
        run["workstation"] = run["workstation"] or sample.workstation
        figures = {name: getattr(sample, name) for name in SAMPLE_FIELDS}
        run["samples"].append(
            {"time": sample.taken_at.isoformat(), "final": sample.final, **figures}
        )
    summary = job_summary(job)
    advice = advise(summary, min_measured_s=settings.USAGE_ADVICE_MIN_S) if summary else []
    request = job.request
    return {
        "is_final": job.is_final,
        "requested": {
            "cpus": request.get("cpus", 1),
            "memory_mb": request.get("memory_mb"),
            "disk_mb": request.get("disk_mb"),
            "gpus": job.gpus,
        },
        "runs": list(runs.values()),
        "summary": _summary_payload(summary),
        "advice": [{"kind": a.kind, "text": a.text, "adjust": a.adjust} for a in advice],
        "clone_url": job_clone_url(job, clone_adjustments(advice)),
    }


def _summary_payload(summary: JobUsageSummary | None) -> dict | None:
    if summary is None:
        return None
    return {
        "measured_s": summary.measured_s,
        "samples": summary.samples,
        "cpus_used": summary.cpus_used,
        "memory_peak_mb": summary.memory_peak_mb,
        "disk_peak_mb": summary.disk_peak_mb,
        "gpu_utilization": summary.gpu_utilization,
        "gpus_used": gpus_used(summary),
        "gpu_idle_share": summary.gpu_idle_share,
        "gpu_memory_peak_mb": summary.gpu_memory_peak_mb,
        "gpu_source": summary.gpu_source,
        "gpu_hours": summary.gpu_hours,
        "idle_gpu_hours": summary.idle_gpu_hours,
        "gpu_energy_kwh": summary.gpu_energy_kwh,
        "co2e_kg": summary.co2e_kg,
        "energy_simulated": summary.energy_simulated,
        "energy_idle_estimated": summary.energy_idle_estimated,
    }
