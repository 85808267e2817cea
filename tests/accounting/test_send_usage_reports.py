"""The monthly email: each lab's leads get their lab's month, once."""

from datetime import date

import pytest
from django.core import mail
from django.core.management import CommandError, call_command

from accounting.models import MonthlyReport
from accounting.monthly import previous_month
from accounting.tasks import send_monthly_reports
from audit.models import AuditEntry

pytestmark = pytest.mark.django_db


def test_each_lead_gets_their_own_labs_summary_with_a_link(campus):
    call_command("send_usage_reports", "--month", "2026-11")
    by_recipient = {message.to[0]: message for message in mail.outbox}
    assert set(by_recipient) == {"lena@example.org", "noor@example.org"}
    vision = by_recipient["lena@example.org"]
    assert vision.subject == "[Nightshift] Vision: usage in November 2026"
    assert "GPU-hours used:         9.0" in vision.body  # 6 + 1 evicted + 2 past midnight
    assert "ada" in vision.body and "bob" not in vision.body
    assert f"/reports/?lab={campus['vision'].pk}&period=month&month=2026-11" in vision.body
    assert "Lost to evictions:      1.0 GPU-hours" in vision.body


def test_running_it_again_sends_nothing_more(campus):
    call_command("send_usage_reports", "--month", "2026-11")
    send_monthly_reports.apply(kwargs={})  # the beat task, for the previous month
    call_command("send_usage_reports", "--month", "2026-11")
    months = sorted(MonthlyReport.objects.values_list("month", flat=True))
    year, month = previous_month()
    assert len([m for m in months if m == date(2026, 11, 1)]) == 2
    assert len(mail.outbox) == 2 + (2 if (year, month) != (2026, 11) else 0)
    assert AuditEntry.objects.filter(action="report.monthly_sent").count() == len(mail.outbox)


def test_a_lab_without_leads_with_an_email_gets_nothing(campus):
    campus["lena"].email = ""
    campus["lena"].save()
    call_command("send_usage_reports", "--month", "2026-11")
    assert [message.to for message in mail.outbox] == [["noor@example.org"]]


def test_a_month_that_is_not_a_month_is_refused(campus):
    with pytest.raises(CommandError, match="YYYY-MM"):
        call_command("send_usage_reports", "--month", "November")
