"""The one place that decides whether a submission fits its quota.

Every submission path (web form, API, clone, re-run, sweeps and study trials) asks through
jobs.admission, to which accounting hands quota_check and lock_quota when Django starts.
job_submit calls quota_check twice: once early, to refuse before files are stored, and again
inside the transaction that records the job, with the lab (or the user) locked, so that two
submissions racing for the last GPU-hour cannot both get through.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import QuerySet, Sum
from django.utils import timezone
from django.utils.formats import date_format

from jobs.models import FINAL_STATES, Job, JobState
from jobs.services import QuotaExceeded
from labs.models import Lab, Membership, QuotaLimits

from .models import QuotaHold, UsageRecord
from .selectors import GpuHours, gpu_hours_used

WAITING_STATES = (JobState.QUEUED, JobState.IDLE, JobState.HELD, JobState.SUSPENDED)


@dataclass(frozen=True)
class Limits:
    """The limits that apply to one user's jobs in one lab (or, with no lab, the site's)."""

    lab: Lab | None
    gpu_hours: float | None = None
    period_days: int = 7
    max_concurrent_gpus: int | None = None
    max_gpus_per_job: int | None = None
    max_runtime_hours: float | None = None
    max_queued_jobs: int | None = None
    # For each limit, whose usage it counts: "lab" (the whole lab's), or "user" (a personal
    # override in the lab, or the site's default for users in no lab).
    scope: dict[str, str] = field(default_factory=dict)

    @property
    def max_runtime_s(self) -> int | None:
        return round(self.max_runtime_hours * 3600) if self.max_runtime_hours else None


def limits_for(user, lab: Lab | None) -> Limits:
    """A user's override wins over the lab's value, limit by limit."""
    if lab is None:
        defaults = settings.QUOTA_DEFAULTS
        values = {name: defaults.get(name) for name in QuotaLimits.LIMIT_FIELDS}
        return Limits(
            lab=None,
            period_days=defaults.get("gpu_hours_period_days") or 7,
            scope=dict.fromkeys(QuotaLimits.LIMIT_FIELDS, "user"),
            **values,
        )
    membership = Membership.objects.filter(lab=lab, user=user).first()
    values, scope = {}, {}
    for name in QuotaLimits.LIMIT_FIELDS:
        override = getattr(membership, name, None) if membership else None
        values[name] = override if override is not None else getattr(lab, name)
        scope[name] = "user" if override is not None else "lab"
    return Limits(lab=lab, period_days=lab.gpu_hours_period_days, scope=scope, **values)


def _counted(user, limits: Limits, name: str, *, owner: str) -> dict:
    """What a limit counts: the lab's, or the user's own (in that lab), or (no lab) the user's
    own outside labs; `owner` names the model's user field."""
    if limits.lab is None:
        return {owner: user, "lab__isnull": True}
    if limits.scope[name] == "lab":
        return {"lab": limits.lab}
    return {"lab": limits.lab, owner: user}


def counted_jobs(user, limits: Limits, name: str) -> QuerySet[Job]:
    """The jobs whose usage a limit counts: the lab's, or the user's own (in that lab)."""
    return Job.objects.filter(**_counted(user, limits, name, owner="owner"))


def counted_holds(user, limits: Limits, name: str) -> QuerySet[QuotaHold]:
    """Runs accepted but not yet written (QuotaHold), chosen exactly as counted_jobs chooses."""
    return QuotaHold.objects.filter(**_counted(user, limits, name, owner="owner"))


def held_runs(holds: QuerySet[QuotaHold]) -> int:
    return holds.aggregate(total=Sum("runs"))["total"] or 0


def held_gpus(holds: QuerySet[QuotaHold]) -> int:
    return sum(gpus * runs for gpus, runs in holds.values_list("gpus", "runs"))


def held_hours(holds: QuerySet[QuotaHold]) -> float:
    return sum(
        reservation_hours(gpus, runtime_s) * runs
        for gpus, runtime_s, runs in holds.filter(gpus__gt=0).values_list(
            "gpus", "runtime_s", "runs"
        )
    )


def counted_usage(user, limits: Limits, name: str) -> QuerySet[UsageRecord]:
    """The runs whose GPU-hours a limit counts, chosen exactly as counted_jobs chooses jobs."""
    return UsageRecord.objects.filter(**_counted(user, limits, name, owner="user"))


def reservation_hours(gpus: int, runtime_s: int | None) -> float:
    """What a job not yet running holds of a GPU-hours quota: all it may use."""
    hours = runtime_s / 3600 if runtime_s else settings.QUOTA_RESERVATION_HOURS
    return gpus * hours


def reserved_hours(jobs: QuerySet[Job]) -> float:
    waiting = jobs.filter(state__in=WAITING_STATES, gpus__gt=0).values_list("gpus", "request")
    return sum(
        reservation_hours(gpus, request.get("max_runtime_s") or request.get("remove_after_s"))
        for gpus, request in waiting
    )


def _who(limits: Limits, name: str) -> tuple[str, str]:
    """Whose limit it is, and the verb "have" to go with them."""
    if limits.lab is None:
        return "You", "have"
    if limits.scope[name] == "lab":
        return f"Your lab “{limits.lab.name}”", "has"
    return f"You (in “{limits.lab.name}”)", "have"


def _whose(limits: Limits, name: str) -> str:
    return " ".join(_who(limits, name))


def _hours(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".") if value < 1000 else f"{value:,.0f}"


def _when(moment: datetime) -> str:
    return date_format(timezone.localtime(moment), "M j H:i")


def quota_check(
    *,
    user,
    lab: Lab | None,
    gpus: int,
    max_runtime_s: int | None,
    now: datetime | None = None,
    runs: int = 1,
) -> int | None:
    """Raise QuotaExceeded when a job of `gpus` GPUs would break a limit; with `runs`, when
    a sweep of that many such jobs would, all of them counted before any is submitted.

    Returns the runtime limit that the quota imposes on the job (HTCondor removes it past
    that), or None.
    """
    this = "this job" if runs == 1 else f"this sweep of {runs} runs"
    limits = limits_for(user, lab)
    now = now or timezone.now()
    if limits.max_gpus_per_job is not None and gpus > limits.max_gpus_per_job:
        raise QuotaExceeded(
            "gpus",
            f"{_who(limits, 'max_gpus_per_job')[0]} may use at most {limits.max_gpus_per_job} GPU"
            f"{'s' if limits.max_gpus_per_job != 1 else ''} per job; "
            f"{'this one' if runs == 1 else this} asks for {gpus}"
            f"{' each' if runs != 1 else ''}.",
        )
    runtime_limit = limits.max_runtime_s
    if runtime_limit is not None and max_runtime_s is not None and max_runtime_s > runtime_limit:
        raise QuotaExceeded(
            "max_runtime_s",
            f"Jobs may run at most {_hours(limits.max_runtime_hours)} h under this quota; "
            f"choose {runtime_limit // 60} minutes or less.",
        )
    if limits.max_queued_jobs is not None:
        waiting = counted_jobs(user, limits, "max_queued_jobs").filter(state__in=WAITING_STATES)
        count = waiting.count() + held_runs(counted_holds(user, limits, "max_queued_jobs"))
        if count + runs > limits.max_queued_jobs:
            if runs == 1:
                text = (
                    f"{_whose(limits, 'max_queued_jobs')} {count} jobs waiting to run, the "
                    f"limit of {limits.max_queued_jobs}; submit more once some of them "
                    "start."
                )
            else:
                text = (
                    f"{_whose(limits, 'max_queued_jobs')} {count} jobs waiting to run, of "
                    f"at most {limits.max_queued_jobs}; {this} would add {runs}. Submit "
                    "fewer runs, or more once some of them start."
                )
            raise QuotaExceeded(None, text)
    if gpus and limits.max_concurrent_gpus is not None:
        active = counted_jobs(user, limits, "max_concurrent_gpus").exclude(state__in=FINAL_STATES)
        in_use = active.aggregate(total=Sum("gpus"))["total"] or 0
        in_use += held_gpus(counted_holds(user, limits, "max_concurrent_gpus"))
        if in_use + gpus * runs > limits.max_concurrent_gpus:
            raise QuotaExceeded(
                "gpus",
                f"{_whose(limits, 'max_concurrent_gpus')} {in_use} of "
                f"{limits.max_concurrent_gpus} GPUs taken by unfinished jobs; {this} asks for "
                f"{gpus * runs} more. Capacity frees up as those jobs end.",
            )
    if gpus and limits.gpu_hours is not None:
        _check_gpu_hours(user, limits, gpus, max_runtime_s or runtime_limit, now, runs, this)
    return runtime_limit if max_runtime_s is None else None


def _check_gpu_hours(
    user,
    limits: Limits,
    gpus: int,
    runtime_s: int | None,
    now,
    runs: int = 1,
    this: str = "this job",
) -> None:
    jobs = counted_jobs(user, limits, "gpu_hours")
    since = now - timedelta(days=limits.period_days)
    used = gpu_hours_used(counted_usage(user, limits, "gpu_hours"), since=since, until=now)
    reserved = reserved_hours(jobs) + held_hours(counted_holds(user, limits, "gpu_hours"))
    needed = reservation_hours(gpus, runtime_s) * runs
    # To the GPU-second: what a running job adds while the check runs does not decide it.
    if round(used.total + reserved + needed, 3) <= limits.gpu_hours:
        return
    period = f"{limits.period_days} day{'s' if limits.period_days != 1 else ''}"
    text = (
        f"{_whose(limits, 'gpu_hours')} used {_hours(used.total)} of "
        f"{_hours(limits.gpu_hours)} GPU-hours in the last {period}"
    )
    if reserved:
        text += f" (and waiting jobs hold {_hours(reserved)} more)"
    text += f"; {this} needs up to {_hours(needed)}."
    freed = next_release(used, limits.period_days)
    if freed is not None:
        text += f" The next {_hours(freed[0])} GPU-hours free up on {_when(freed[1])}."
    raise QuotaExceeded("gpus", text)


def next_release(used: GpuHours, period_days: int) -> tuple[float, datetime] | None:
    """The usage that leaves the rolling window first: (GPU-hours, when it has all left)."""
    if used.first_to_leave is None:
        return None
    hours, end = used.first_to_leave
    return hours, end + timedelta(days=period_days)


@dataclass(frozen=True)
class QuotaStanding:
    """Where a user stands in one lab (or the site's default quota): for their page and API."""

    lab: Lab | None
    limits: Limits
    gpu_hours_used: float
    gpu_hours_reserved: float
    gpus_in_use: int
    jobs_waiting: int


def quota_standings(user, now: datetime | None = None) -> list[QuotaStanding]:
    now = now or timezone.now()
    labs = list(Lab.objects.filter(memberships__user=user).order_by("name"))
    standings = []
    for lab in labs or [None]:
        limits = limits_for(user, lab)
        since = now - timedelta(days=limits.period_days)
        hours_jobs = counted_jobs(user, limits, "gpu_hours")
        hours_held = held_hours(counted_holds(user, limits, "gpu_hours"))
        standings.append(
            QuotaStanding(
                lab=lab,
                limits=limits,
                gpu_hours_used=gpu_hours_used(
                    counted_usage(user, limits, "gpu_hours"), since=since, until=now
                ).total,
                gpu_hours_reserved=reserved_hours(hours_jobs) + hours_held,
                gpus_in_use=(
                    counted_jobs(user, limits, "max_concurrent_gpus")
                    .exclude(state__in=FINAL_STATES)
                    .aggregate(total=Sum("gpus"))["total"]
                    or 0
                )
                + held_gpus(counted_holds(user, limits, "max_concurrent_gpus")),
                jobs_waiting=counted_jobs(user, limits, "max_queued_jobs")
                .filter(state__in=WAITING_STATES)
                .count()
                + held_runs(counted_holds(user, limits, "max_queued_jobs")),
            )
        )
    return standings


def lock_quota(user, lab: Lab | None) -> None:
    """Serialise quota checks of one lab (or one user in no lab) until the transaction ends."""
    if lab is not None:
        Lab.objects.select_for_update().filter(pk=lab.pk).first()
    else:
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()


def quota_hold(*, user, lab: Lab | None, gpus: int, runtime_s: int | None, runs: int) -> QuotaHold:
    """Hold the quota for `runs` runs accepted now and written later (call it in the
    transaction that checked the quota with it locked)."""
    return QuotaHold.objects.create(owner=user, lab=lab, gpus=gpus, runtime_s=runtime_s, runs=runs)


def quota_hold_release(hold_pk: int | None, runs: int) -> None:
    """`runs` of a hold's runs are written as jobs now (or will never be): the quota counts
    them as jobs from now on, or not at all. Call it in the transaction that writes them."""
    if hold_pk is None:
        return
    hold = QuotaHold.objects.select_for_update().filter(pk=hold_pk).first()
    if hold is None:
        return
    if hold.runs <= runs:
        hold.delete()
    else:
        hold.runs -= runs
        hold.save(update_fields=["runs"])
