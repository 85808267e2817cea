from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import QuerySet
from django.utils import timezone

from accounting.models import UsageRecord
from accounting.selectors import gpu_hours_used
from jobs.models import Job

from .models import Lab, Membership


def labs_managed_by(user) -> QuerySet[Lab]:
    """The labs whose members a user manages: those they lead; every lab for staff."""
    if user.is_staff:
        return Lab.objects.all()
    if not user.has_perm("labs.lead_lab"):
        return Lab.objects.none()
    return Lab.objects.filter(memberships__user=user, memberships__role=Membership.Role.LEAD)


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
        usage.append(MemberUsage(
            membership, gpu_hours_used(runs, since=since, until=now).total, jobs.count(),
        ))  # fmt: skip
    return usage
