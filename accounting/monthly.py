"""Each lab's monthly usage summary, e-mailed to its leads on the 1st, once per lab and month."""

from __future__ import annotations

from datetime import date, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from audit.services import audit_record
from labs.models import Lab, Membership

from .models import MonthlyReport
from .periods import period_month
from .reports import Report, Scope, usage_report


def previous_month(today: date | None = None) -> tuple[int, int]:
    today = today or timezone.localdate()
    first = today.replace(day=1) - timedelta(days=1)
    return first.year, first.month


def report_url(*, lab: Lab, year: int, month: int) -> str:
    query = f"?lab={lab.pk}&period=month&month={year:04d}-{month:02d}"
    return settings.PORTAL_URL.rstrip("/") + reverse("accounting:reports") + query


def monthly_summary_text(lab: Lab, report: Report, url: str) -> str:
    totals = report.totals
    lines = [
        f"Nightshift usage for {lab.name}, {report.period.label}",
        "",
        f"GPU-hours used:         {totals['gpu_hours']:.1f}",
        f"Jobs that ended:        {totals['jobs_ended']} ({totals['completed']} completed)",
        f"Lost to evictions:      {totals['lost_gpu_hours']:.1f} GPU-hours",
    ]
    if totals["goodput_percent"] is not None:
        lines.append(f"Goodput:                {totals['goodput_percent']:.1f} %")
    if totals["median_wait_minutes"] is not None:
        lines.append(
            f"Queue wait:             median {totals['median_wait_minutes']:.1f} min, "
            f"90th percentile {totals['p90_wait_minutes']:.1f} min"
        )
    users = report.tables["usage"].rows[:10]
    if users:
        lines += ["", "Top users by GPU-hours:"]
        lines += [f"  {row['group']:<24} {row['gpu_hours']:>9.1f}" for row in users]
    else:
        lines += ["", "Nobody in the lab ran a job this month."]
    lines += ["", f"Charts, tables and CSV exports: {url}"]
    return "\n".join(lines)


def monthly_reports_send(year: int | None = None, month: int | None = None) -> list[MonthlyReport]:
    """Email each lab's leads the month's summary, once per lab and month."""
    if year is None or month is None:
        year, month = previous_month()
    period = period_month(year, month)
    first = date(year, month, 1)
    sent = []
    user_model = get_user_model()
    for lab in Lab.objects.order_by("name"):
        leads = user_model.objects.filter(
            memberships__lab=lab, memberships__role=Membership.Role.LEAD, is_active=True
        ).exclude(email="")
        recipients = sorted({lead.email for lead in leads})
        if not recipients:
            continue
        with transaction.atomic():
            record, created = MonthlyReport.objects.select_for_update().get_or_create(
                lab=lab, month=first, defaults={"recipients": ", ".join(recipients)}
            )
            if not created:
                continue  # already sent (or a second beat got here first)
            report = usage_report(Scope((lab.pk,), lab.name), period, "user")
            url = report_url(lab=lab, year=year, month=month)
            send_mail(
                subject=f"[Nightshift] {lab.name}: usage in {period.label}",
                message=monthly_summary_text(lab, report, url),
                from_email=None,
                recipient_list=recipients,
            )
            audit_record(
                action="report.monthly_sent",
                actor=None,
                target=lab,
                detail=f"{period.label} to {', '.join(recipients)}",
            )
        sent.append(record)
    return sent
