"""Read-only queries over usage records: the one definition of GPU-hours used."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import PermissionDenied
from django.db.models import DurationField, ExpressionWrapper, F, FloatField, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, Extract, Greatest, Least, NullIf
from django.http import Http404
from django.utils import timezone
from django.utils.text import slugify

from jobs.models import Job
from labs.models import Lab, Membership

from . import reports
from .forms import ReportForm
from .models import UsageRecord
from .periods import Period
from .reports import GROUPINGS as GROUPINGS
from .reports import Scope as Scope
from .reports import Table as Table
from .reports import fetch_rows as fetch_rows


def overlapping(records: QuerySet[UsageRecord], since: datetime, until: datetime) -> QuerySet:
    """Records of runs that overlap [since, until): ended after `since`, or still going."""
    return records.filter(started_at__lt=until).exclude(ended_at__lte=since)


def gpu_seconds_between(since: datetime, until: datetime) -> ExpressionWrapper:
    """A record's GPU-seconds charged inside [since, until); a run still going counts up to
    `until`. What an owner's reclaim lost (forgiven_s) is not charged, in proportion to the
    part of the run inside."""
    end = Least(Coalesce("ended_at", Value(until)), Value(until))
    inside = ExpressionWrapper(end - Greatest("started_at", Value(since)), DurationField())
    # PostgreSQL's LEAST skips a NULL (a run still going has no wall time yet): 0 first.
    charged = Value(1.0) - Least(
        Coalesce(F("forgiven_s") / NullIf(F("wall_s"), Value(0.0)), Value(0.0)), Value(1.0)
    )
    return ExpressionWrapper(
        Greatest(Extract(inside, "epoch"), Value(0.0)) * F("gpus") * charged, FloatField()
    )


@dataclass(frozen=True)
class GpuHours:
    total: float
    # The earliest-ending finished run in the window: (its GPU-hours in it, its end).
    first_to_leave: tuple[float, datetime] | None = None


def gpu_hours_used(records: QuerySet[UsageRecord], *, since: datetime, until: datetime) -> GpuHours:
    """GPU-hours = wall time x GPUs, of these runs inside [since, until], less the work an
    owner's reclaim lost (forgiven_s, not charged).

    This is the one definition of GPU-hours used: quotas, the account and lab pages, the API
    and the reports (which compute the same expression in SQL) read the same usage records.
    """
    records = overlapping(records.filter(gpus__gt=0), since, until)
    seconds = gpu_seconds_between(since, until)
    total = records.aggregate(total=Sum(seconds))["total"] or 0.0
    first = (
        records.filter(ended_at__isnull=False)
        .annotate(seconds=seconds)
        .order_by("ended_at")
        .values_list("seconds", "ended_at")
        .first()
    )
    return GpuHours(total / 3600, (first[0] / 3600, first[1]) if first else None)


@dataclass(frozen=True)
class MemberUsage:
    membership: Membership
    gpu_hours: float
    jobs: int


def lab_member_usage(lab: Lab) -> list[MemberUsage]:
    """Each member's GPU-hours and jobs in the lab over its quota period."""
    now = timezone.now()
    since = now - timedelta(days=lab.gpu_hours_period_days)
    usage = []
    for membership in lab.memberships.select_related("user").order_by("user__username"):
        runs = UsageRecord.objects.filter(lab=lab, user=membership.user)
        jobs = Job.objects.filter(lab=lab, owner=membership.user, created_at__gte=since)
        usage.append(
            MemberUsage(
                membership,
                gpu_hours_used(runs, since=since, until=now).total,
                jobs.count(),
            )
        )
    return usage


def report_request(user, query) -> tuple[ReportForm, reports.Scope | None]:
    """The checked form and the scope it asks for (None when the form has errors).

    PermissionDenied for a user who may read no report; Http404 for another lab's report.
    """
    labs = reports.report_labs(user)
    if not user.is_staff and not labs:
        raise PermissionDenied("Usage reports are for lab leads and administrators.")
    form = ReportForm(query, labs=labs, everything=user.is_staff)
    if not form.is_valid():
        if "lab" in form.errors:
            raise Http404("No such lab among those whose reports you can read.")
        return form, None
    try:
        return form, reports.report_scope(user, form.cleaned_data.get("lab"))
    except reports.ReportNotAllowed as exc:
        raise Http404(str(exc)) from None


def export_filename(table: str, scope: reports.Scope, period: Period) -> str:
    """The name a report's CSV downloads as: the table, whose report and which days."""
    start = timezone.localtime(period.start).date()
    end = timezone.localtime(period.end).date()
    return f"nightshift-{table}-{slugify(scope.label)[:40] or 'all'}-{start}-{end}.csv"
