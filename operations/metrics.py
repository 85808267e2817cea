"""Prometheus metrics for /metrics.

What happens in a process is counted in Redis by plumbing.metrics; what is true at a moment
(jobs by state, queue depth, the pool's GPUs) is read here at scrape time from the database
and Redis.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator

from celery import current_app
from django.db.models import Count, Max, Sum
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from plumbing.metrics import INF, queue_length, read_counters, read_histograms, read_marks


def _histogram(name: str, metric: str, documentation: str, label_names: list[str]) -> Metric:
    family = HistogramMetricFamily(metric, documentation, labels=label_names)
    for labels, (buckets, total) in read_histograms(name).items():
        values = json.loads(labels)
        family.add_metric([values.get(n, "") for n in label_names], buckets, total)
    return family


def _counter(name: str, metric: str, documentation: str, label_names: list[str]) -> Metric:
    family = CounterMetricFamily(metric, documentation, labels=label_names)
    for labels, value in read_counters(name).items():
        values = json.loads(labels)
        family.add_metric([values.get(n, "") for n in label_names], value)
    return family


def _jobs_by_state() -> Metric:
    from jobs.models import Job, JobState

    family = GaugeMetricFamily("nightshift_jobs", "Jobs in the portal by state.", labels=["state"])
    counts = dict(Job.objects.values_list("state").annotate(n=Count("pk")).order_by())
    for state in JobState.values:
        family.add_metric([state], counts.get(state, 0))
    return family


def _jobs_stalled() -> Metric:
    from jobs.models import Job, JobState
    from jobs.services import POOL_STALLED_REASON

    return _gauge(
        "nightshift_jobs_stalled",
        "Idle jobs that a free workstation could run, waiting for longer than "
        "NIGHTSHIFT_POOL_STALL_AFTER_S: above 0, the pool is not matching jobs.",
        Job.objects.filter(state=JobState.IDLE, wait_reason=POOL_STALLED_REASON).count(),
    )


def _queue_depth() -> Metric:
    app = current_app
    family = GaugeMetricFamily(
        "nightshift_celery_queue_length",
        "Tasks waiting in the broker for a worker.",
        labels=["queue"],
    )
    queues = {app.conf.task_default_queue} | {q.name for q in (app.conf.task_queues or [])}
    for queue in sorted(queues):
        family.add_metric([queue], queue_length(queue))
    return family


def _pool_gpus() -> Iterator[Metric]:
    from accounting.models import CapacitySample

    latest = CapacitySample.objects.aggregate(at=Max("taken_at"))["at"]
    gpus = GaugeMetricFamily(
        "nightshift_pool_gpus",
        "The pool's GPUs in the latest capacity sample: free, busy "
        "(with this portal's jobs or others') or unavailable (owner back, "
        "switched off).",
        labels=["state"],
    )
    sums = {"idle": 0, "nightshift": 0, "other": 0, "unavailable": 0}
    if latest is not None:
        row = CapacitySample.objects.filter(taken_at=latest).aggregate(
            idle=Sum("idle_gpus"),
            nightshift=Sum("nightshift_gpus"),
            other=Sum("other_gpus"),
            unavailable=Sum("unavailable_gpus"),
        )
        sums = {key: value or 0 for key, value in row.items()}
    gpus.add_metric(["free"], sums["idle"])
    gpus.add_metric(["busy"], sums["nightshift"] + sums["other"])
    gpus.add_metric(["unavailable"], sums["unavailable"])
    yield gpus
    ours = GaugeMetricFamily(
        "nightshift_pool_gpus_nightshift", "Of the busy GPUs, those running this portal's jobs."
    )
    ours.add_metric([], sums["nightshift"])
    yield ours
    sampled = GaugeMetricFamily(
        "nightshift_pool_sample_timestamp_seconds",
        "When the latest capacity sample's interval began.",
    )
    sampled.add_metric([], latest.timestamp() if latest else 0)
    yield sampled


def _timestamps(now: float) -> Iterator[Metric]:
    marks = read_marks()
    last_sync = marks.get("sync_success")
    yield _gauge(
        "nightshift_sync_last_success_timestamp_seconds",
        "When a sync cycle last completed (0: never).",
        last_sync or 0,
    )
    yield _gauge(
        "nightshift_sync_lag_seconds",
        "Seconds since a sync cycle last completed; the portal's view of the queue "
        "is at most this old (+Inf: never synced).",
        now - last_sync if last_sync else INF,
    )
    success, failure = marks.get("schedd_success", 0), marks.get("schedd_failure", 0)
    yield _gauge(
        "nightshift_schedd_last_success_timestamp_seconds",
        "When a call to the schedd or collector last succeeded (0: never).",
        success,
    )
    yield _gauge(
        "nightshift_schedd_reachable",
        "1 when the latest call to the schedd or collector succeeded.",
        1 if success and success >= failure else 0,
    )


def _gauge(name: str, documentation: str, value: float) -> Metric:
    family = GaugeMetricFamily(name, documentation)
    family.add_metric([], value)
    return family


class PortalCollector:
    """Everything /metrics shows, gathered at scrape time."""

    def collect(self) -> Iterable[Metric]:
        now = time.time()
        yield _jobs_by_state()
        yield _jobs_stalled()
        yield _counter(
            "submissions",
            "nightshift_submissions",
            "Submission attempts by kind (job, sweep) and outcome (submitted, "
            "retrying: the schedd did not answer; refused; invalid).",
            ["kind", "outcome"],
        )
        yield _histogram(
            "submission",
            "nightshift_submission_latency_seconds",
            "From the student's submit to the schedd accepting the job.",
            ["kind"],
        )
        yield _counter("syncs", "nightshift_sync_cycles", "Sync cycles by outcome.", ["outcome"])
        yield _histogram(
            "sync", "nightshift_sync_duration_seconds", "How long a sync cycle took.", []
        )
        yield _histogram(
            "sync_phase",
            "nightshift_sync_phase_duration_seconds",
            "How long each phase of a sync cycle took (read, ask, compare, apply, housekeeping).",
            ["phase"],
        )
        yield _histogram(
            "schedd_call",
            "nightshift_schedd_call_duration_seconds",
            "Calls to the schedd and collector, by call.",
            ["call"],
        )
        yield _counter(
            "schedd_call_errors",
            "nightshift_schedd_call_errors",
            "Calls to the schedd and collector that failed, by call.",
            ["call"],
        )
        yield from _timestamps(now)
        yield _queue_depth()
        yield from _pool_gpus()
