"""The lab lead's form for a reservation."""

from __future__ import annotations

from django import forms


class DateTimeLocalInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self) -> None:
        super().__init__(format="%Y-%m-%dT%H:%M")


class ReservationForm(forms.Form):
    purpose = forms.CharField(
        max_length=200,
        help_text="What it is for: a course deadline, a demo. Shown on the pool page.",
    )
    starts_at = forms.DateTimeField(
        label="From", widget=DateTimeLocalInput(), help_text="In the campus time zone."
    )
    ends_at = forms.DateTimeField(label="Until", widget=DateTimeLocalInput())
    gpus = forms.IntegerField(
        label="GPUs",
        required=False,
        min_value=1,
        max_value=10_000,
        help_text="The portal holds whole workstations, those most likely to stay free of their "
        "owners through the window. Or name the workstations below instead.",
    )
    workstations = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="The workstations with GPUs the pool has reported this week.",
    )

    def __init__(self, *args, workstations: dict[str, int], **kwargs) -> None:
        super().__init__(*args, label_suffix="", **kwargs)
        self.fields["workstations"].choices = [
            (name, f"{name} ({gpus} GPU{'s' if gpus != 1 else ''})")
            for name, gpus in sorted(workstations.items())
        ]
