from __future__ import annotations

import re

from django import forms

from labs.models import Lab, Visibility

from .models import MODEL_NAME_HELP, MODEL_NAME_PATTERN
from .services import MAX_CARD_CHARACTERS


def suggested_name(job_name: str) -> str:
    """A model name from a job's: train.py -> train, 'BERT fine-tune' -> BERT-fine-tune."""
    stem = re.sub(r"\.(py|tar\.gz|tgz|zip)$", "", job_name or "")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")[:80]
    return slug or "model"


class PublishForm(forms.Form):
    name = forms.RegexField(
        regex=MODEL_NAME_PATTERN,
        max_length=80,
        error_messages={"invalid": MODEL_NAME_HELP},
        help_text="Jobs find it at models/NAME/. A name your lab already has adds a version.",
    )
    lab = forms.ModelChoiceField(
        queryset=Lab.objects.none(), empty_label=None, help_text="The lab it is published in."
    )
    visibility = forms.ChoiceField(
        choices=Visibility.choices,
        initial=Visibility.LAB,
        help_text="Who may see, download and use this version. Everyone: leads and admins.",
    )
    files = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple,
        help_text="The model is made of these; a file under outputs/ keeps its path below it.",
    )
    card = forms.CharField(
        required=False,
        max_length=MAX_CARD_CHARACTERS,
        widget=forms.Textarea(attrs={"rows": 12}),
        help_text="Markdown: what it is, how it was trained, how to use it, its limits. HTML "
        "is shown as text.",
    )

    def __init__(self, *args, user, output_files, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["lab"].queryset = (
            Lab.objects.all() if user.is_staff else Lab.objects.filter(memberships__user=user)
        )
        self.fields["files"].choices = [
            (file.path, f"{file.path} ({file.size:,} bytes)") for file in output_files
        ]
