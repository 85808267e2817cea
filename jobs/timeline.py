"""A job's timeline: each event is a row and a log line with the job's id; what the sync's
changes say there."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from condor_bridge import JobObservation

from .models import Job, JobEvent, JobState
from .selectors import checkpoint_of

event_log = logging.getLogger("nightshift.jobs")

# Why a job left a workstation, where an app above knows more than "reclaimed by its owner"
# (lending: its owner asked for it back): (workstation, when) -> words, or None.
EvictionCause = Callable[[str, datetime], "str | None"]
_eviction_causes: list[EvictionCause] = []


def eviction_cause_register(cause: EvictionCause) -> None:
    if cause not in _eviction_causes:
        _eviction_causes.append(cause)


def eviction_source(workstation: str, at: datetime) -> str:
    """Why the job left `workstation` at `at`, as the timeline says it."""
    for cause in _eviction_causes:
        said = cause(workstation, at)
        if said:
            return said
    return (
        f"{workstation} was reclaimed by its owner"
        if workstation
        else "The workstation was reclaimed"
    )


def job_event_record(job: Job, kind: str, detail: str = "", *, actor=None) -> JobEvent:
    event = JobEvent.objects.create(job=job, kind=kind, state=job.state, detail=detail, actor=actor)
    log_job_events([event])
    return event


def log_job_events(events: Iterable[JobEvent]) -> None:
    """Each event on the job's timeline is also a log line, with the job's id."""
    for event in events:
        event_log.info(
            "%s (%s): %s",
            event.kind,
            event.state,
            event.detail,
            extra={"job_id": str(event.job.public_id)},
        )


@dataclass(frozen=True)
class Timelines:
    """What the timelines of a batch of jobs already say, read in at most two queries for the
    batch, and only for the jobs whose new events depend on it."""

    ran: frozenset[int] = frozenset()
    cancel_requested: frozenset[int] = frozenset()
    latest_kind: dict[int, str] = field(default_factory=dict)

    @classmethod
    def for_changes(cls, changes: Iterable[tuple[int, str, JobObservation]]) -> Timelines:
        """For changes (job pk, its new state, the observation) about to be written: whether
        each job ran before (a start says "started" or "resumed"; a run no sync saw is
        added), and whether a cancel was asked (a removal's outcome), for jobs that start,
        are removed or have run; and the latest event (an administrator's vacate) of jobs
        back to waiting. A batch that only goes to held, say, reads nothing."""
        runs, latest = [], []
        for pk, state, observation in changes:
            if state in (JobState.RUNNING, JobState.REMOVED) or observation.num_starts > 0:
                runs.append(pk)
            if state == JobState.IDLE:
                latest.append(pk)
        kinds: set[tuple[int, str]] = set()
        if runs:
            kinds = set(
                JobEvent.objects.filter(
                    job_id__in=runs, kind__in=("started", "resumed", "cancel requested")
                ).values_list("job_id", "kind")
            )
        latest_kind = {}
        if latest:
            latest_kind = dict(
                JobEvent.objects.filter(job_id__in=latest)
                .order_by("job_id", "-at", "-id")
                .distinct("job_id")
                .values_list("job_id", "kind")
            )
        return cls(
            ran=frozenset(pk for pk, kind in kinds if kind != "cancel requested"),
            cancel_requested=frozenset(pk for pk, kind in kinds if kind == "cancel requested"),
            latest_kind=latest_kind,
        )


def _describe(
    job: Job, previous_state: str, observation: JobObservation, timelines: Timelines
) -> tuple[str, str]:
    state = job.state
    if state == JobState.RUNNING:
        where = observation.workstation or "a workstation"
        if observation.gpu_model:
            where += f" ({observation.gpu_model})"
        return ("resumed" if job.pk in timelines.ran else "started"), f"Running on {where}"
    if state == JobState.IDLE and (previous_state == JobState.RUNNING or observation.evicted):
        where = observation.last_workstation or job.workstation
        source = eviction_source(where, observation.last_vacated_at or timezone.now())
        if timelines.latest_kind.get(job.pk) == "vacate requested":
            source = f"Moved off {where or 'its workstation'} by an administrator"
        if "notebook" in job.live_services:
            return "evicted", f"{source}; a notebook session does not move, so it ends."
        checkpoint = checkpoint_of(job)
        if checkpoint is not None:
            saved = timezone.localtime(checkpoint.saved_at)
            resume = f"it will resume from its checkpoint of {saved:%H:%M:%S}"
        else:
            resume = "with no checkpoint, it will start again from the beginning"
        return "evicted", f"{source}; {resume} on the next free workstation."
    if state == JobState.HELD:
        return "held", observation.hold_reason or "Held by HTCondor."
    if state == JobState.COMPLETED:
        return "completed", "Exited with code 0."
    if state == JobState.FAILED:
        if observation.exit_signal is not None:
            return "failed", f"Killed by signal {observation.exit_signal}."
        return "failed", f"Exited with code {observation.exit_code}."
    if state == JobState.REMOVED:
        return "removed", observation.status_detail or "Removed from the queue."
    return state, observation.status_detail


def _ran_unseen(job: Job, kind: str, observation: JobObservation, timelines: Timelines) -> bool:
    """A run that started and stopped between two syncs (a short job, or a sync that was
    slow or lost to an overlapping one): its timeline would go from waiting straight to its
    end, and never say where it ran."""
    return (
        kind not in ("started", "resumed")
        and observation.num_starts > 0
        and job.pk not in timelines.ran
    )


def _unseen_run(observation: JobObservation) -> str:
    where = observation.last_workstation or observation.workstation or "a workstation"
    if observation.started_at is None:
        return f"Ran on {where}"
    return f"Ran on {where} from {timezone.localtime(observation.started_at):%H:%M:%S}"


def change_events(
    job: Job, previous_state: str, observation: JobObservation, timelines: Timelines
) -> list[JobEvent]:
    """The timeline events for a job the sync has just changed (not yet saved): what it
    changed to, after the run it had when no sync saw it running."""
    kind, detail = _describe(job, previous_state, observation, timelines)
    events = []
    if _ran_unseen(job, kind, observation, timelines):
        events.append(
            JobEvent(
                job=job, kind="started", state=JobState.RUNNING, detail=_unseen_run(observation)
            )
        )
    events.append(JobEvent(job=job, kind=kind, state=job.state, detail=detail))
    return events
