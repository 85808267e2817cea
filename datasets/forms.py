from __future__ import annotations

from django import forms
from django.conf import settings

from labs.models import Lab

from .models import DATASET_NAME_HELP, DATASET_NAME_PATTERN, Dataset


class DatasetForm(forms.Form):
    name = forms.RegexField(
        regex=DATASET_NAME_PATTERN,
        max_length=80,
        error_messages={"invalid": DATASET_NAME_HELP},
        help_text="Jobs find it at datasets/NAME/. A name you already use adds a version to "
        "that dataset.",
    )
    description = forms.CharField(
        required=False, max_length=500, help_text="What is in it, in a sentence."
    )
    visibility = forms.ChoiceField(choices=Dataset.Visibility.choices)
    lab = forms.ModelChoiceField(
        queryset=Lab.objects.none(), required=False, help_text="For “My lab”: which lab."
    )
    file = forms.FileField(
        label="Files",
        required=False,
        help_text="A .zip or .tar.gz of a folder (unpacked and checked), or a single file.",
    )
    url = forms.URLField(
        label="…or an https URL",
        required=False,
        max_length=2000,
        assume_scheme="https",
        help_text="Fetched once by the portal and checksummed: a file, or a .zip or .tar.gz.",
    )
    sha256 = forms.RegexField(
        label="Its SHA-256 (optional)",
        required=False,
        regex=r"^\s*[0-9a-fA-F]{64}\s*$",
        error_messages={"invalid": "A SHA-256 is 64 hexadecimal digits."},
        help_text="If the URL's publisher gives one: a download that differs is refused.",
    )
    path = forms.CharField(
        label="…or a folder on the shared file system",
        required=False,
        max_length=1000,
        help_text="Read and checksummed once, then linked into jobs, never copied.",
    )

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
        given = [key for key in ("file", "url", "path") if data.get(key)]
        if len(given) != 1 and not self.errors:
            ways = "a file, an https URL" + (" or a shared folder" if "path" in self.fields else "")
            self.add_error(None, f"Give one of {ways}.")
        return data
