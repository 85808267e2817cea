"""A job's timeline: each event is a row and a log line with the job's id."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from .models import Job, JobEvent

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
