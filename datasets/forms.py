from __future__ import annotations

from django import forms
from django.conf import settings

from labs.models import Lab

from .models import DATASET_NAME_HELP, DATASET_NAME_PATTERN, Dataset


class DatasetForm(forms.Form):
    name = forms.RegexField(
        regex=DATASET_NAME_PATTERN, max_length=80,
        error_messages={"invalid": DATASET_NAME_HELP},
        help_text="Jobs find it at datasets/NAME/. A name you already use adds a version to "
        "that dataset.",
    )  # fmt: skip
    description = forms.CharField(
        required=False, max_length=500, help_text="What is in it, in a sentence."
    )
    visibility = forms.ChoiceField(choices=Dataset.Visibility.choices)
    lab = forms.ModelChoiceField(
        queryset=Lab.objects.none(), required=False, help_text="For “My lab”: which lab."
    )
    file = forms.FileField(
        label="Files", required=False,
        help_text="A .zip or .tar.gz of a folder (unpacked and checked), or a single file.",
    )  # fmt: skip
    path = forms.CharField(
        label="…or a folder on the shared file system", required=False, max_length=1000,
        help_text="Read and checksummed once, then linked into jobs, never copied.",
    )  # fmt: skip

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["lab"].queryset = Lab.objects.filter(memberships__user=user)
        if not user.is_staff:
            self.fields["visibility"].choices = [
                c for c in Dataset.Visibility.choices if c[0] != Dataset.Visibility.SITE
            ]
        if settings.DATASET_ROOTS:
            roots = ", ".join(str(root) for root in settings.DATASET_ROOTS)
            self.fields["path"].widget.attrs["placeholder"] = f"{roots}/…"
        else:
            del self.fields["path"]

    def clean(self) -> dict:
        data = super().clean()
        if bool(data.get("file")) == bool(data.get("path")):
            field = "file" if "path" not in self.fields else None
            self.add_error(field, "Upload a file, or give a shared folder (one of the two).")
        return data
