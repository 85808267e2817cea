from __future__ import annotations

from django import forms
from django.conf import settings

from labs.models import Lab

from .models import Environment
from .requirements import MAX_REQUIREMENTS_BYTES


class VersionForm(forms.Form):
    requirements = forms.CharField(
        label="Packages",
        required=False,
        max_length=MAX_REQUIREMENTS_BYTES,
        widget=forms.Textarea(
            attrs={
                "rows": 8,
                "spellcheck": "false",
                "placeholder": "torch>=2.3\ntorchvision\nnumpy",
            }
        ),
        help_text="One package per line, as in a requirements.txt. They are resolved now into "
        "exact versions with their hashes; each workstation installs them once.",
    )
    requirements_file = forms.FileField(
        label="…or a requirements.txt",
        required=False,
        help_text="Used instead of the list above when given.",
    )
    python_version = forms.RegexField(
        label="Python version",
        regex=r"^3\.\d{1,2}$",
        required=False,
        max_length=5,
        help_text="Left empty: the workstations' Python.",
        error_messages={"invalid": "Write a version such as 3.13."},
    )
    container_image = forms.CharField(
        label="…or a container image",
        required=False,
        max_length=500,
        help_text="Instead of packages: e.g. docker://pytorch/pytorch:2.4.0-cuda12.1-cudnn9-"
        "runtime, or an Apptainer .sif path or URL. Needs workstations that run containers.",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["python_version"].widget.attrs["placeholder"] = (
            settings.ENVIRONMENT_PYTHON_VERSION
        )

    def clean(self) -> dict:
        data = super().clean()
        upload = data.get("requirements_file")
        if upload is not None:
            if upload.size > MAX_REQUIREMENTS_BYTES:
                self.add_error("requirements_file", "A requirements.txt this large is not one.")
                return data
            try:
                data["requirements"] = upload.read().decode("utf-8-sig")
            except UnicodeDecodeError:
                self.add_error("requirements_file", "That file is not UTF-8 text.")
        if not data.get("requirements", "").strip() and not data.get("container_image"):
            self.add_error("requirements", "List some packages, or name a container image.")
        return data

    def version_fields(self) -> dict:
        data = self.cleaned_data
        return {
            key: data.get(key) or ""
            for key in ("requirements", "python_version", "container_image")
        }


class EnvironmentForm(VersionForm):
    name = forms.CharField(
        max_length=80, help_text="Jobs name it as NAME or NAME@VERSION, e.g. vision-torch@2."
    )
    description = forms.CharField(
        required=False, max_length=500, help_text="What it is for, in a sentence."
    )
    visibility = forms.ChoiceField(choices=Environment.Visibility.choices)
    lab = forms.ModelChoiceField(
        queryset=Lab.objects.none(), required=False, help_text="For “My lab”: which lab."
    )

    field_order = [
        "name",
        "description",
        "visibility",
        "lab",
        "requirements",
        "requirements_file",
        "python_version",
        "container_image",
    ]

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["lab"].queryset = Lab.objects.filter(memberships__user=user)
        if not user.is_staff:
            self.fields["visibility"].choices = [
                c for c in Environment.Visibility.choices if c[0] != Environment.Visibility.SITE
            ]
        self.order_fields(self.field_order)
