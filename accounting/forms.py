from __future__ import annotations

from datetime import date

from django import forms
from django.utils import timezone

from .periods import Period, period_between, period_last_days, period_month
from .reports import GROUPINGS

MAX_CUSTOM_DAYS = 731


class ReportForm(forms.Form):
    """The report's period, grouping and lab, from the query string; every value checked."""

    period = forms.ChoiceField(
        choices=[
            ("7d", "Last 7 days"),
            ("30d", "Last 30 days"),
            ("month", "A month"),
            ("custom", "Custom range"),
        ],
        required=False,
    )
    month = forms.RegexField(
        regex=r"^\d{4}-(0[1-9]|1[0-2])$",
        required=False,
        error_messages={"invalid": "Give the month as YYYY-MM, e.g. 2026-10."},
    )
    start = forms.DateField(required=False, label="From")
    end = forms.DateField(required=False, label="To")
    group = forms.ChoiceField(
        choices=[(key, label) for key, (label, _, _) in GROUPINGS.items()],
        required=False,
        label="Group by",
    )
    # A lab's id (what the page's menu sends) or its name (handier in scripts and the CLI).
    lab = forms.CharField(required=False, widget=forms.Select, max_length=200)

    def __init__(self, data, *, labs, everything: bool) -> None:
        super().__init__(data)
        self.labs = list(labs)
        first = [("", "All labs and users")] if everything else [("", "All my labs")]
        self.fields["lab"].widget.choices = first + [(lab.pk, lab.name) for lab in self.labs]

    def clean_lab(self) -> int | None:
        wanted = self.cleaned_data.get("lab", "").strip()
        if not wanted:
            return None
        for lab in self.labs:
            if wanted == str(lab.pk) or wanted.casefold() == lab.name.casefold():
                return lab.pk
        raise forms.ValidationError("No such lab among those whose reports you can read.")

    def clean(self):
        data = super().clean()
        kind = data.get("period") or "30d"
        data["period"] = kind
        data["group"] = data.get("group") or "user"
        today = timezone.localdate()
        if kind == "month":
            if not data.get("month"):
                if "month" not in self.errors:
                    self.add_error("month", "Choose a month.")
                return data
            year, month = (int(part) for part in data["month"].split("-"))
            if date(year, month, 1) > today:
                self.add_error("month", "That month has not begun yet.")
        elif kind == "custom":
            start, end = data.get("start"), data.get("end")
            if not start or not end:
                self.add_error("start" if not start else "end", "Give both dates of the range.")
            elif end < start:
                self.add_error("end", "The range ends before it starts.")
            elif (end - start).days > MAX_CUSTOM_DAYS:
                self.add_error("end", f"A range covers at most {MAX_CUSTOM_DAYS} days.")
        return data

    def report_period(self) -> Period:
        data = self.cleaned_data
        if data["period"] == "7d":
            return period_last_days(7)
        if data["period"] == "month":
            year, month = (int(part) for part in data["month"].split("-"))
            return period_month(year, month)
        if data["period"] == "custom":
            return period_between(data["start"], data["end"])
        return period_last_days(30)
