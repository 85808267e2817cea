"""A job's timeline: each event is a row and a log line with the job's id."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable

from .models import Job, JobEvent, Sweep

event_log = logging.getLogger("nightshift.jobs")


def job_event_record(job: Job, kind: str, detail: str = "", *, actor=None) -> JobEvent:
    event = JobEvent.objects.create(job=job, kind=kind, state=job.state, detail=detail,
                                    actor=actor)  # fmt: skip
    log_job_events([event])
    return event


def log_job_events(events: Iterable[JobEvent]) -> None:
    """Each event on the job's timeline is also a log line, with the job's id."""
    for event in events:
        event_log.info("%s (%s): %s", event.kind, event.state, event.detail,
                       extra={"job_id": str(event.job.public_id)})  # fmt: skip


def log_sweep_events(sweep: Sweep, events: Iterable[JobEvent]) -> None:
    """The same events for a sweep's runs, one line per kind with the sweep's id: a
    thousand runs make one line, not a thousand; each run's timeline has them all."""
    kinds = Counter(event.kind for event in events)
    for kind, count in kinds.items():
        event_log.info("%s: %s run%s of sweep %s", kind, count, "s" if count != 1 else "",
                       sweep.public_id, extra={"sweep_id": str(sweep.public_id)})  # fmt: skip
