"""Reading who owns what, the terms in force, and what each workstation gave."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.conf import settings
from django.utils import timezone

from accounting.models import UsageRecord
from forecasts.services import WORKSTATION_NAME
from jobs.models import Job, JobState

from .models import EVICTION_SEEN_WITHIN, LendingTerms, Reclaim, WorkstationOwner


def workstations_owned_by(user) -> list[str]:
    if not getattr(user, "is_authenticated", False):
        return []
    return list(
        WorkstationOwner.objects.filter(user=user)
        .order_by("workstation")
        .values_list("workstation", flat=True)
    )


def owners_of(workstation: str) -> list[WorkstationOwner]:
    return list(WorkstationOwner.objects.filter(workstation=workstation).select_related("user"))


def may_manage(user, workstation: str) -> bool:
    """Its owners and admins set its terms and ask it back; nobody manages what is not a
    workstation's name."""
    if not getattr(user, "is_authenticated", False) or not WORKSTATION_NAME.fullmatch(workstation):
        return False
    if user.is_staff:
        return True
    return WorkstationOwner.objects.filter(workstation=workstation, user=user).exists()


def terms_of(workstation: str) -> LendingTerms | None:
    return LendingTerms.objects.filter(workstation=workstation).prefetch_related("labs").first()


def reclaim_in_effect(workstation: str, now: datetime | None = None) -> Reclaim | None:
    now = now or timezone.now()
    return (
        Reclaim.objects.filter(
            workstation=workstation, ended_at=None, requested_at__lte=now, until__gt=now
        )
        .order_by("deadline")
        .first()
    )


def reclaim_cause(workstation: str, at: datetime) -> str | None:
    """For a job's timeline: why it left `workstation` around `at`, if its owner asked."""
    if not workstation:
        return None
    nearby = Reclaim.objects.filter(
        workstation=workstation, requested_at__lte=at, until__gt=at - EVICTION_SEEN_WITHIN
    )
    asked = any(reclaim.caused_eviction_at(at) for reclaim in nearby)
    return f"{workstation}'s owner asked for it back" if asked else None


def terms_for_kit(workstation: str, now: datetime | None = None) -> dict:
    """What the workstation's kit publishes (deploy/execute-node/placement-figures): the
    terms, evaluated there against its own clock, and any request to have it back."""
    now = now or timezone.now()
    terms = terms_of(workstation)
    reclaim = reclaim_in_effect(workstation, now)
    payload: dict = {"workstation": workstation, "time_zone": settings.TIME_ZONE}
    if terms is None:
        payload["terms"] = None
    else:
        groups = sorted(lab.accounting_group for lab in terms.labs.all())
        payload["terms"] = {
            "days": sorted(terms.days),
            "from_minute": terms.from_minute,
            "until_minute": terms.until_minute,
            "away_after_s": terms.away_after_minutes * 60 if terms.only_while_away else None,
            "max_gpus": terms.max_gpus,
            "max_memory_mb": terms.max_memory_gb * 1024 if terms.max_memory_gb else None,
            "accounting_groups": groups or None,
            "paused_until": terms.paused_until,
        }
    payload["reclaim"] = (
        None if reclaim is None else {"deadline": reclaim.deadline, "until": reclaim.until}
    )
    return payload


@dataclass(frozen=True)
class Running:
    lab: str  # the lab's name, or "" for a job of no lab
    gpus: int


def running_on(workstation: str) -> list[Running]:
    """The Nightshift jobs running there now, by lab: an owner sees labs, never people."""
    jobs = Job.objects.filter(state=JobState.RUNNING, workstation=workstation).select_related("lab")
    return [Running(job.lab.name if job.lab else "", job.request.get("gpus") or 0) for job in jobs]


@dataclass
class Tally:
    """What a workstation's runs over some stretch gave: GPU-hours (open runs up to now), the
    jobs, students and labs they were for, and their GPU energy above idle where measured."""

    gpu_hours: float = 0.0
    kwh: float | None = None
    co2e_kg: float | None = 0.0  # None once a measured run has none (no grid intensity)
    simulated: bool = False
    jobs: set[int] = field(default_factory=set)
    students: set[int] = field(default_factory=set)
    labs: set[str] = field(default_factory=set)

    def add(self, record: UsageRecord, now: datetime) -> None:
        self.gpu_hours += record.gpu_hours(until=now)
        self.jobs.add(record.job_id)
        self.students.add(record.user_id)
        if record.lab is not None:
            self.labs.add(record.lab.name)
        if record.gpu_energy_kwh is not None:
            self.kwh = (self.kwh or 0.0) + record.gpu_energy_kwh
            self.simulated = self.simulated or record.energy_simulated
            if self.co2e_kg is not None:
                self.co2e_kg = None if record.co2e_kg is None else self.co2e_kg + record.co2e_kg

    @property
    def measured_co2e_kg(self) -> float | None:
        return self.co2e_kg if self.kwh is not None else None


@dataclass(frozen=True)
class GivenWeek:
    week: str  # its Monday, YYYY-MM-DD
    gpu_hours: float
    jobs: int
    labs: int
    kwh: float | None = None  # GPU energy above idle of its runs' ended jobs, if measured


@dataclass(frozen=True)
class Given:
    weeks: list[GivenWeek]
    total: Tally

    @property
    def gpu_hours(self) -> float:
        return round(self.total.gpu_hours, 2)

    @property
    def jobs(self) -> int:
        return len(self.total.jobs)

    @property
    def students(self) -> int:
        return len(self.total.students)

    @property
    def labs(self) -> list[str]:
        return sorted(self.total.labs)

    @property
    def kwh(self) -> float | None:
        return None if self.total.kwh is None else round(self.total.kwh, 4)

    @property
    def co2e_kg(self) -> float | None:
        co2e = self.total.measured_co2e_kg
        return None if co2e is None else round(co2e, 4)

    @property
    def energy_simulated(self) -> bool:
        return self.total.simulated


def _local_midnight(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, datetime.min.time()))


def given_by(workstation: str, *, weeks: int = 16, now: datetime | None = None) -> Given:
    """What the workstation gave, week by week (campus time) over the last `weeks` weeks."""
    now = now or timezone.now()
    today = timezone.localtime(now).date()
    first_monday = today - timedelta(days=today.weekday(), weeks=weeks - 1)
    records = UsageRecord.objects.filter(
        workstation=workstation, started_at__gte=_local_midnight(first_monday)
    )
    by_week: dict[str, Tally] = defaultdict(Tally)
    total = Tally()
    for record in records.select_related("lab"):
        local = timezone.localtime(record.started_at).date()
        by_week[(local - timedelta(days=local.weekday())).isoformat()].add(record, now)
        total.add(record, now)
    rows = []
    for number in range(weeks):
        week = (first_monday + timedelta(weeks=number)).isoformat()
        tally = by_week.get(week, Tally())
        energy = round(tally.kwh, 4) if tally.kwh is not None else None
        rows.append(
            GivenWeek(week, round(tally.gpu_hours, 2), len(tally.jobs), len(tally.labs), energy)
        )
    return Given(rows, total)


@dataclass(frozen=True)
class GivenTerm:
    starts: date
    ends: date  # the day the next term starts
    tally: Tally

    @property
    def label(self) -> str:
        return f"{self.starts:%d %b %Y} to {self.ends - timedelta(days=1):%d %b %Y}"

    @property
    def kwh(self) -> float | None:
        return None if self.tally.kwh is None else round(self.tally.kwh, 4)


def _term_starts_in(year: int) -> list[date]:
    # A term starting on 29 February starts on the 28th in other years.
    return [
        date(year, month, 28 if (month, day) == (2, 29) else day)
        for month, day in settings.TERM_STARTS
    ]


def term_starts_before(day: date, count: int) -> list[date]:
    """The starts of the `count` terms up to the one `day` is in (settings.TERM_STARTS),
    oldest first."""
    starts: list[date] = []
    year = day.year
    while len(starts) < count:
        starts += [start for start in _term_starts_in(year) if start <= day]
        year -= 1
    return sorted(starts)[-count:]


def _next_term_start(start: date) -> date:
    return min(
        d for d in _term_starts_in(start.year) + _term_starts_in(start.year + 1) if d > start
    )


def given_by_term(
    workstation: str, *, count: int = 3, now: datetime | None = None
) -> list[GivenTerm]:
    """What the workstation gave in each of the last `count` terms, this one last."""
    now = now or timezone.now()
    today = timezone.localtime(now).date()
    terms = [
        GivenTerm(start, _next_term_start(start), Tally())
        for start in term_starts_before(today, count)
    ]
    records = UsageRecord.objects.filter(
        workstation=workstation, started_at__gte=_local_midnight(terms[0].starts)
    )
    for record in records.select_related("lab"):
        local = timezone.localtime(record.started_at).date()
        term = next((t for t in reversed(terms) if t.starts <= local), None)
        if term is not None:
            term.tally.add(record, now)
    return terms
