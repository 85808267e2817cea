"""What is worth telling: the sync's job changes (a start, an end, a hold), and what a
regular scan finds (a session near its limit, a long wait, a sweep done, a reservation
about to begin). Each occasion has a key, so that telling it again sends nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from experiments.models import Sweep
from forecasts.models import Reservation, StartPrediction
from forecasts.selectors import shown
from jobs.models import FINAL_STATES, Job, JobEvent, JobState
from live_sessions.selectors import WARN_BEFORE_END_S, session_status

from .events import Channel, Event
from .owners import owner_occasions
from .services import Occasion, notify

# A waiting job whose earliest likely start is this far off tells its owner when.
LONG_WAIT = timedelta(minutes=30)
# What the scan looks back over for sweeps whose last run ended (the sync's own word on a
# run's end finds the others at once).
RECENT = timedelta(days=1)
RESERVATION_NOTICE = timedelta(minutes=10)


def _job_url(job: Job) -> str:
    return reverse("jobs:detail", args=[job.public_id])


def _clock(moment: datetime, now: datetime) -> str:
    local, today = timezone.localtime(moment), timezone.localtime(now)
    if local.date() == today.date():
        return f"{local:%H:%M}"
    return f"{local:%a %d %b %H:%M}"


def job_changes_notify(changes: Iterable[tuple[int, str]]) -> int:
    """The sync's changes, as (job pk, "started" | "ended" | "held"): the occasions they make
    for their owners. Runs of a sweep speak through their sweep once it is done."""
    kinds = dict(changes)
    jobs = Job.objects.filter(pk__in=kinds).select_related("owner")
    occasions: list[Occasion] = []
    sweeps: set[int] = set()
    for job in jobs:
        kind = kinds[job.pk]
        if job.sweep_id is not None:
            if kind == "ended":
                sweeps.add(job.sweep_id)
            continue
        occasion = _job_occasion(job, kind)
        if occasion is not None:
            occasions.append(occasion)
    occasions += _sweeps_finished(Sweep.objects.filter(pk__in=sweeps))
    return len(notify(occasions))


def _job_occasion(job: Job, kind: str) -> Occasion | None:
    session = "notebook" in job.live_services
    url = _job_url(job)
    email = frozenset({Channel.EMAIL}) if job.notify_by_email else frozenset()
    name = f"“{job.name}”"
    if kind == "started" and job.state == JobState.RUNNING:
        where = job.workstation or "a workstation"
        if session:
            return Occasion(
                user=job.owner,
                event=Event.SESSION_READY,
                key=f"session:{job.public_id}:ready",
                title="Your notebook session is running",
                body=f"JupyterLab is starting on {where}; open it from its page.",
                url=url,
            )
        return Occasion(
            user=job.owner,
            event=Event.JOB_STARTED,
            key=f"job:{job.public_id}:started",
            title=f"{name} started",
            body=f"It runs on {where}.",
            url=url,
        )
    if kind == "ended" and job.state in (JobState.COMPLETED, JobState.FAILED) and not session:
        label = job.get_state_display().lower()
        body = "Its outputs are ready to download." if job.state == JobState.COMPLETED else ""
        if job.state == JobState.FAILED and job.exit_code is not None:
            body = f"It exited with code {job.exit_code}. The log says why."
        return Occasion(
            user=job.owner,
            event=Event.JOB_ENDED,
            key=f"job:{job.public_id}:ended",
            title=f"{name} {label}",
            body=body,
            url=url,
            also=email,
            data={"job": str(job.public_id), "state": job.state, "exit_code": job.exit_code},
        )
    if kind == "held" and job.state == JobState.HELD:
        holds = JobEvent.objects.filter(job=job, state=JobState.HELD).count()
        explanation = job.hold_explanation
        body = f"{explanation.title} {explanation.advice}" if explanation else job.hold_reason
        return Occasion(
            user=job.owner,
            event=Event.JOB_HELD,
            key=f"job:{job.public_id}:held:{holds}",
            title=f"{name} is held",
            body=body[:1000],
            url=url,
            also=email,
            data={"job": str(job.public_id), "hold_reason_code": job.hold_reason_code},
        )
    return None


def _sweeps_finished(sweeps: Iterable[Sweep]) -> list[Occasion]:
    occasions = []
    for sweep in sweeps:
        states = Counter(sweep.runs.values_list("state", flat=True))
        if not states or any(state not in FINAL_STATES for state in states):
            continue
        if sweep.kind == Sweep.Kind.STUDY and sweep.finished_at is None:
            continue
        runs = sum(states.values())
        parts = [
            f"{states[state]} {JobState(state).label.lower()}"
            for state in (JobState.COMPLETED, JobState.FAILED, JobState.REMOVED)
            if states[state]
        ]
        kind = "Study" if sweep.kind == Sweep.Kind.STUDY else "Sweep"
        occasions.append(
            Occasion(
                user=sweep.owner,
                event=Event.SWEEP_FINISHED,
                key=f"sweep:{sweep.public_id}:done",
                title=f"{kind} “{sweep.name}” finished",
                body=f"{runs} run{'s' if runs != 1 else ''}: {', '.join(parts)}.",
                url=reverse("jobs:sweep", args=[sweep.public_id]),
                data={
                    "sweep": str(sweep.public_id),
                    "runs": runs,
                    **states,
                },
            )
        )
    return occasions


def scan(now: datetime | None = None) -> int:
    """What time alone brings: sessions near their limit, waits that will be long, studies
    that stopped, reservations about to begin, and what workstation owners hear
    (notifications.owners)."""
    now = now or timezone.now()
    occasions = _sessions_ending(now) + _long_waits(now) + _reservations_starting(now)
    occasions += owner_occasions(now)
    studies = Sweep.objects.filter(
        kind=Sweep.Kind.STUDY, finished_at__gte=now - RECENT
    ).select_related("owner")
    occasions += _sweeps_finished(studies)
    return len(notify(occasions))


def _sessions_ending(now: datetime) -> list[Occasion]:
    running = Job.objects.filter(
        state=JobState.RUNNING, request__live_services__contains=["notebook"]
    ).select_related("owner")
    occasions = []
    for job in running:
        status = session_status(job, now=now)
        if status.seconds_left is None or status.seconds_left > WARN_BEFORE_END_S:
            continue
        ends = now + timedelta(seconds=status.seconds_left)
        occasions.append(
            Occasion(
                user=job.owner,
                event=Event.SESSION_ENDING,
                key=f"session:{job.public_id}:ending:{job.num_starts}",
                title=f"Your notebook session ends at {_clock(ends, now)}",
                body="Save your work in the session folder: it is kept with the job's outputs.",
                url=_job_url(job),
            )
        )
    return occasions


def _long_waits(now: datetime) -> list[Occasion]:
    current = StartPrediction.objects.filter(
        first=False,
        job__state=JobState.IDLE,
        job__sweep__isnull=True,
        earliest__gte=now + LONG_WAIT,
    ).select_related("job__owner")
    occasions = []
    for stored in current:
        job, prediction = stored.job, shown(stored)
        if prediction.earliest < now + LONG_WAIT:
            continue
        occasions.append(
            Occasion(
                user=job.owner,
                event=Event.LONG_WAIT,
                key=f"job:{job.public_id}:long_wait",
                title=f"“{job.name}” will wait",
                body=f"No workstation that fits it is likely to be free before "
                f"{_clock(prediction.earliest, now)}; most likely it starts at "
                f"{_clock(prediction.likely, now)}.",
                url=_job_url(job),
                data={
                    "job": str(job.public_id),
                    "earliest": prediction.earliest.isoformat(),
                    "likely": prediction.likely.isoformat(),
                },
            )
        )
    return occasions


def _reservations_starting(now: datetime) -> list[Occasion]:
    soon = Reservation.objects.filter(
        Q(cancelled_at__isnull=True),
        starts_at__lte=now + RESERVATION_NOTICE,
        ends_at__gt=now,
    ).select_related("created_by", "lab")
    occasions = []
    for reservation in soon:
        if reservation.created_by is None:
            continue
        held = ", ".join(reservation.workstations)
        occasions.append(
            Occasion(
                user=reservation.created_by,
                event=Event.RESERVATION_STARTING,
                key=f"reservation:{reservation.public_id}:starts",
                title=f"Your reservation “{reservation.purpose}” begins at "
                f"{_clock(reservation.starts_at, now)}",
                body=f"{held} held for {reservation.lab} until {_clock(reservation.ends_at, now)}.",
                url=reverse("labs:detail", args=[reservation.lab_id]),
            )
        )
    return occasions
