from __future__ import annotations

import re

from django.core.management.base import BaseCommand, CommandError
from django.template.defaultfilters import pluralize

from accounting.monthly import monthly_reports_send, previous_month


class Command(BaseCommand):
    help = (
        "Email each lab's leads the usage summary of a month (default: the last one), once per "
        "lab and month. Beat runs it on the 1st at 07:00."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--month", help="YYYY-MM; default the month that just ended.")

    def handle(self, *args, month: str | None = None, **options) -> None:
        if month is None:
            year, number = previous_month()
        elif re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", month):
            year, number = (int(part) for part in month.split("-"))
        else:
            raise CommandError("Give the month as YYYY-MM, e.g. --month 2026-10.")
        sent = monthly_reports_send(year, number)
        for report in sent:
            self.stdout.write(f"{report.lab.name}: sent to {report.recipients}")
        reports = f"{len(sent)} lab report{pluralize(len(sent))}"
        self.stdout.write(f"{reports} sent for {year:04d}-{number:02d}.")
