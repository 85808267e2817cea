"""Prometheus metrics for /metrics.

What happens in a process (a submission in a worker, a schedd call in beat's sync, a request
in gunicorn) is counted in Redis, which every process of the portal shares, on one host or
several; what is true at a moment (jobs by state, queue depth, the pool's GPUs) is read at
scrape time from the database and Redis. Counting never fails the work it counts: when
Redis does not answer, the event is dropped and the work goes on.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from functools import cache

import redis
from django.conf import settings
from django.db.models import Count, Max, Sum
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

logger = logging.getLogger(__name__)

INF = math.inf
# Upper bounds in seconds. A submission is the time from the student's submit to the
# schedd's accepting it; a sync cycle reads the whole queue; a schedd call is one request.
BUCKETS = {
    "submission": (0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, INF),
    "sync": (0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, INF),
    "schedd_call": (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, INF),
}
_SEPARATOR = "\x1f"


@cache
def _redis() -> redis.Redis:
    # Short timeouts: a metric is never worth waiting for.
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=0.5,
                                socket_connect_timeout=0.5)  # fmt: skip


def _key(kind: str, name: str = "") -> str:
    return f"nightshift:{settings.NIGHTSHIFT_INSTANCE}:metrics:{kind}:{name}"


def _labels(labels: dict[str, str]) -> str:
    return json.dumps(labels, sort_keys=True)


def _write(commands) -> None:
    """One round trip to Redis for everything one event counts."""
    try:
        pipe = _redis().pipeline(transaction=False)
        commands(pipe)
        pipe.execute()
    except redis.RedisError as exc:
        logger.debug("metric dropped: %s", exc)


def _observe(pipe, name: str, seconds: float, **labels: str) -> None:
    """One observation of a duration histogram (BUCKETS[name])."""
    bound = next(b for b in BUCKETS[name] if seconds <= b)
    field = _labels(labels)
    pipe.hincrby(_key("h", name), f"{field}{_SEPARATOR}{bound}", 1)
    pipe.hincrbyfloat(_key("h", name), f"{field}{_SEPARATOR}sum", seconds)


def _count(pipe, name: str, **labels: str) -> None:
    pipe.hincrby(_key("c", name), _labels(labels), 1)


def _mark(pipe, name: str) -> None:
    """Remember when something last happened (a Unix time)."""
    pipe.hset(_key("t"), name, time.time())


# -- What the portal's code reports -------------------------------------------------------


def submission_done(*, kind: str, outcome: str, waited_s: float | None = None) -> None:
    """A submission attempt: submitted (after waiting waited_s since the student's submit),
    retrying (the schedd did not answer), refused (HTCondor said no) or invalid."""

    def commands(pipe) -> None:
        _count(pipe, "submissions", kind=kind, outcome=outcome)
        if outcome == "submitted" and waited_s is not None:
            _observe(pipe, "submission", max(waited_s, 0.0), kind=kind)

    _write(commands)


def sync_done(*, seconds: float, ok: bool) -> None:
    def commands(pipe) -> None:
        _count(pipe, "syncs", outcome="ok" if ok else "failed")
        if ok:
            _observe(pipe, "sync", seconds)
            _mark(pipe, "sync_success")

    _write(commands)


def schedd_call_done(call: str, seconds: float, ok: bool) -> None:
    """The bridge's hook: every call to the schedd or the collector."""

    def commands(pipe) -> None:
        _observe(pipe, "schedd_call", seconds, call=call)
        if ok:
            _mark(pipe, "schedd_success")
        else:
            _count(pipe, "schedd_call_errors", call=call)
            _mark(pipe, "schedd_failure")

    _write(commands)


# -- Scraping -----------------------------------------------------------------------------


def _read_histograms(name: str) -> dict[str, tuple[list[tuple[str, float]], float]]:
    raw = _redis().hgetall(_key("h", name))
    per_labels: dict[str, dict[str, float]] = defaultdict(dict)
    for field, value in raw.items():
        labels, _, part = field.decode().rpartition(_SEPARATOR)
        per_labels[labels][part] = float(value)
    histograms = {}
    for labels, parts in per_labels.items():
        total, buckets = 0.0, []
        for bound in BUCKETS[name]:
            total += parts.get(str(bound), 0.0)
            buckets.append(("+Inf" if bound == INF else str(bound), total))
        histograms[labels] = (buckets, parts.get("sum", 0.0))
    return histograms


def _histogram(name: str, metric: str, documentation: str, label_names: list[str]) -> Metric:
    family = HistogramMetricFamily(metric, documentation, labels=label_names)
    for labels, (buckets, total) in _read_histograms(name).items():
        values = json.loads(labels)
        family.add_metric([values.get(n, "") for n in label_names], buckets, total)
    return family


def _counter(name: str, metric: str, documentation: str, label_names: list[str]) -> Metric:
    family = CounterMetricFamily(metric, documentation, labels=label_names)
    for labels, value in _redis().hgetall(_key("c", name)).items():
        values = json.loads(labels)
        family.add_metric([values.get(n, "") for n in label_names], float(value))
    return family


def _jobs_by_state() -> Metric:
    from jobs.models import Job, JobState

    family = GaugeMetricFamily("nightshift_jobs", "Jobs in the portal by state.",
                               labels=["state"])  # fmt: skip
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
    from portal.celery import app

    family = GaugeMetricFamily("nightshift_celery_queue_length",
                               "Tasks waiting in the broker for a worker.",
                               labels=["queue"])  # fmt: skip
    queues = {app.conf.task_default_queue} | {q.name for q in (app.conf.task_queues or [])}
    for queue in sorted(queues):
        family.add_metric([queue], _redis().llen(queue))
    return family


def _pool_gpus() -> Iterator[Metric]:
    from accounting.models import CapacitySample

    latest = CapacitySample.objects.aggregate(at=Max("taken_at"))["at"]
    gpus = GaugeMetricFamily("nightshift_pool_gpus",
                             "The pool's GPUs in the latest capacity sample: free, busy "
                             "(with this portal's jobs or others') or unavailable (owner back, "
                             "switched off).", labels=["state"])  # fmt: skip
    sums = {"idle": 0, "nightshift": 0, "other": 0, "unavailable": 0}
    if latest is not None:
        row = CapacitySample.objects.filter(taken_at=latest).aggregate(
            idle=Sum("idle_gpus"), nightshift=Sum("nightshift_gpus"),
            other=Sum("other_gpus"), unavailable=Sum("unavailable_gpus"),
        )  # fmt: skip
        sums = {key: value or 0 for key, value in row.items()}
    gpus.add_metric(["free"], sums["idle"])
    gpus.add_metric(["busy"], sums["nightshift"] + sums["other"])
    gpus.add_metric(["unavailable"], sums["unavailable"])
    yield gpus
    ours = GaugeMetricFamily("nightshift_pool_gpus_nightshift",
                             "Of the busy GPUs, those running this portal's jobs.")  # fmt: skip
    ours.add_metric([], sums["nightshift"])
    yield ours
    sampled = GaugeMetricFamily("nightshift_pool_sample_timestamp_seconds",
                                "When the latest capacity sample's interval began.")  # fmt: skip
    sampled.add_metric([], latest.timestamp() if latest else 0)
    yield sampled


def _timestamps(now: float) -> Iterator[Metric]:
    marks = {k.decode(): float(v) for k, v in _redis().hgetall(_key("t")).items()}
    last_sync = marks.get("sync_success")
    yield _gauge("nightshift_sync_last_success_timestamp_seconds",
                 "When a sync cycle last completed (0: never).", last_sync or 0)  # fmt: skip
    yield _gauge("nightshift_sync_lag_seconds",
                 "Seconds since a sync cycle last completed; the portal's view of the queue "
                 "is at most this old (+Inf: never synced).",
                 now - last_sync if last_sync else INF)  # fmt: skip
    success, failure = marks.get("schedd_success", 0), marks.get("schedd_failure", 0)
    yield _gauge(
        "nightshift_schedd_last_success_timestamp_seconds",
        "When a call to the schedd or collector last succeeded (0: never).",
        success,
    )
    yield _gauge("nightshift_schedd_reachable",
                 "1 when the latest call to the schedd or collector succeeded.",
                 1 if success and success >= failure else 0)  # fmt: skip


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
        yield _counter("submissions", "nightshift_submissions",
                       "Submission attempts by kind (job, sweep) and outcome (submitted, "
                       "retrying: the schedd did not answer; refused; invalid).",
                       ["kind", "outcome"])  # fmt: skip
        yield _histogram("submission", "nightshift_submission_latency_seconds",
                         "From the student's submit to the schedd accepting the job.",
                         ["kind"])  # fmt: skip
        yield _counter("syncs", "nightshift_sync_cycles", "Sync cycles by outcome.",
                       ["outcome"])  # fmt: skip
        yield _histogram("sync", "nightshift_sync_duration_seconds",
                         "How long a sync cycle took.", [])  # fmt: skip
        yield _histogram("schedd_call", "nightshift_schedd_call_duration_seconds",
                         "Calls to the schedd and collector, by call.", ["call"])  # fmt: skip
        yield _counter("schedd_call_errors", "nightshift_schedd_call_errors",
                       "Calls to the schedd and collector that failed, by call.",
                       ["call"])  # fmt: skip
        yield from _timestamps(now)
        yield _queue_depth()
        yield from _pool_gpus()
