"""Counters and histograms the portal's processes keep in Redis, for operations' /metrics.

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
from functools import cache

import redis
from django.conf import settings

logger = logging.getLogger(__name__)

INF = math.inf
# Upper bounds in seconds. A submission is the time from the student's submit to the
# schedd's accepting it; a sync cycle reads the whole queue; a schedd call is one request.
BUCKETS = {
    "submission": (0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, INF),
    "sync": (0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, INF),
    "sync_phase": (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, INF),
    "schedd_call": (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, INF),
}
_SEPARATOR = "\x1f"


@cache
def _redis() -> redis.Redis:
    # Short timeouts: a metric is never worth waiting for.
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=0.5, socket_connect_timeout=0.5)


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


def sync_done(*, seconds: float, ok: bool, phases: dict[str, float] | None = None) -> None:
    """A sync cycle, and the seconds each of its phases took (jobs.sync.SYNC_PHASES)."""

    def commands(pipe) -> None:
        _count(pipe, "syncs", outcome="ok" if ok else "failed")
        if ok:
            _observe(pipe, "sync", seconds)
            for phase, phase_seconds in (phases or {}).items():
                _observe(pipe, "sync_phase", phase_seconds, phase=phase)
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


# -- What /metrics reads ------------------------------------------------------------------


def read_histograms(name: str) -> dict[str, tuple[list[tuple[str, float]], float]]:
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


def read_counters(name: str) -> dict[str, float]:
    """{labels as JSON: count} of one counter."""
    return {
        labels.decode(): float(value) for labels, value in _redis().hgetall(_key("c", name)).items()
    }


def read_marks() -> dict[str, float]:
    """When each marked thing last happened (Unix times)."""
    return {k.decode(): float(v) for k, v in _redis().hgetall(_key("t")).items()}


def queue_length(queue: str) -> int:
    """Tasks waiting in the broker's list for `queue` (Redis is the broker)."""
    return _redis().llen(queue)
