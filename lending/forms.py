"""The owner's page: lending terms, and asking the workstation back."""

from __future__ import annotations

import datetime

from django import forms

from labs.models import Lab

from .models import DAY_NAMES, LendingTerms


def _minute(value: datetime.time | None, *, end: bool = False) -> int:
    if value is None:
        return 1440 if end else 0
    minute = value.hour * 60 + value.minute
    return 1440 if end and minute == 0 else minute


def _time(minute: int) -> datetime.time:
    return datetime.time(minute // 60 % 24, minute % 60)


class TermsForm(forms.Form):
    days = forms.TypedMultipleChoiceField(
        choices=list(enumerate(DAY_NAMES)),
        coerce=int,
        widget=forms.CheckboxSelectMultiple,
        help_text="The days your workstation may be lent.",
    )
    from_time = forms.TimeField(
        label="From",
        required=False,
        widget=forms.TimeInput(attrs={"type": "time"}),
        help_text="Empty: from midnight.",
    )
    until_time = forms.TimeField(
        label="Until",
        required=False,
        widget=forms.TimeInput(attrs={"type": "time"}),
        help_text="Empty or 00:00: until midnight.",
    )
    only_while_away = forms.BooleanField(
        label="Only while I am away", required=False, help_text="Nobody at the keyboard or mouse."
    )
    away_after_minutes = forms.IntegerField(
        label="Away after (minutes)", min_value=1, max_value=1440, initial=15
    )
    max_gpus = forms.IntegerField(
        label="At most this many GPUs", required=False, min_value=0, max_value=64
    )
    max_memory_gb = forms.IntegerField(
        label="At most this much memory (GB)", required=False, min_value=1, max_value=16384
    )
    labs = forms.ModelMultipleChoiceField(
        queryset=Lab.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every lab.",
    )
    paused_until = forms.DateTimeField(
        label="Pause lending until",
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="Not lent at all until then (your time zone is the campus's).",
    )

    @classmethod
    def for_terms(cls, terms: LendingTerms | None, data=None) -> TermsForm:
        if terms is None:
            return cls(data, initial={"days": list(range(7)), "away_after_minutes": 15})
        initial = {
            "days": terms.days,
            "from_time": None if terms.every_hour else _time(terms.from_minute),
            "until_time": None if terms.every_hour else _time(terms.until_minute),
            "only_while_away": terms.only_while_away,
            "away_after_minutes": terms.away_after_minutes,
            "max_gpus": terms.max_gpus,
            "max_memory_gb": terms.max_memory_gb,
            "labs": list(terms.labs.all()),
            "paused_until": terms.paused_until,
        }
        return cls(data, initial=initial)

    def minutes(self) -> tuple[int, int]:
        data = self.cleaned_data
        return _minute(data.get("from_time")), _minute(data.get("until_time"), end=True)


class ReclaimForm(forms.Form):
    minutes = forms.IntegerField(
        label="I need it back in (minutes)", min_value=1, max_value=240, initial=10
    )


class ClaimForm(forms.Form):
    code = forms.CharField(
        label="Code from the workstation",
        max_length=40,
        help_text="Run `sudo nightshift-claim-code` on the workstation; it prints a code "
        "like NS-7KQ2-M9XD, good for 24 hours.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
