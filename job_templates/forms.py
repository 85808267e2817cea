from __future__ import annotations

import json

from django import forms

from condor_bridge.types import MAX_CPUS, MAX_GPU_MEMORY_GB, MAX_GPUS, MAX_RUNTIME_S
from jobs.services import data_choices, model_choices, software_choices
from labs.models import Lab, Membership, Visibility
from model_registry.services import MAX_CARD_CHARACTERS

from .models import TEMPLATE_NAME_HELP, TEMPLATE_NAME_PATTERN
from .parameters import Parameter
from .services import RESOURCE_DEFAULTS

PARAMETERS_EXAMPLE = json.dumps(
    [
        {
            "name": "epochs",
            "type": "integer",
            "label": "Epochs",
            "default": 3,
            "min": 1,
            "max": 20,
            "help": "Passes over the data.",
            "argument": "--epochs",
        },
        {
            "name": "learning_rate",
            "type": "number",
            "default": 2e-5,
            "min": 1e-7,
            "max": 0.1,
            "argument": "--lr",
        },
        {
            "name": "dataset",
            "type": "dataset",
            "help": "Text files, one example per line.",
            "argument": "--data",
        },
    ],
    indent=2,
)


def labs_led_by(user):
    if user.is_staff:
        return Lab.objects.all()
    return Lab.objects.filter(memberships__user=user, memberships__role=Membership.Role.LEAD)


class TemplatePublishForm(forms.Form):
    lab = forms.ModelChoiceField(
        queryset=Lab.objects.none(),
        empty_label=None,
        help_text="The lab it is published in; you lead it.",
    )
    name = forms.RegexField(
        regex=TEMPLATE_NAME_PATTERN,
        max_length=80,
        error_messages={"invalid": TEMPLATE_NAME_HELP},
        help_text="Short, for the CLI: nightshift run LAB/NAME. A name your lab already has "
        "adds a version.",
    )
    title = forms.CharField(
        max_length=120, help_text="What students see, e.g. “Fine-tune a text classifier”."
    )
    visibility = forms.ChoiceField(
        choices=Visibility.choices, initial=Visibility.LAB, help_text="Who may see and run it."
    )
    project = forms.FileField(
        required=False,
        help_text="A Python script (.py) or a project archive (.zip, .tar.gz). "
        "Students never need to see it. For a new version, leave it empty to keep the project.",
    )
    # Set when publishing a new version: its project is kept unless a new one is chosen.
    project_from = forms.IntegerField(required=False, widget=forms.HiddenInput)
    entry_command = forms.CharField(
        max_length=1000,
        help_text="How it starts, e.g. python train.py. The parameters' arguments come after it.",
    )
    serve_command = forms.CharField(
        required=False,
        max_length=1000,
        help_text="Optional: how a model this template made is served, e.g. python serve.py. "
        "It must answer HTTP on the Unix socket $NIGHTSHIFT_SERVE_SOCKET (or 127.0.0.1:"
        "$NIGHTSHIFT_SERVE_PORT); the model is at models/NAME/.",
    )
    software = forms.CharField(
        label="Software environment",
        required=False,
        max_length=120,
        widget=forms.Select,
        help_text="The environment every run uses (NAME@VERSION).",
    )
    datasets = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Every run gets these at datasets/NAME/.",
    )
    models = forms.MultipleChoiceField(
        label="Published models",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Every run gets these at models/NAME/.",
    )
    gpus = forms.IntegerField(label="GPUs", min_value=0, max_value=MAX_GPUS, initial=1)
    gpu_memory_gb = forms.FloatField(
        label="GPU memory (GB)", required=False, min_value=0, max_value=MAX_GPU_MEMORY_GB
    )
    cpus = forms.IntegerField(label="CPUs", min_value=1, max_value=MAX_CPUS, initial=1)
    memory_mb = forms.IntegerField(label="Memory (MB)", min_value=1, initial=2048)
    disk_mb = forms.IntegerField(label="Disk (MB)", min_value=1, initial=4096)
    max_runtime_s = forms.IntegerField(
        label="Maximum runtime (seconds)", required=False, min_value=1, max_value=MAX_RUNTIME_S
    )
    output_paths = forms.CharField(
        initial="outputs", max_length=1000, help_text="Files or folders to keep, comma-separated."
    )
    parameters = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 14, "class": "code"}),
        initial=PARAMETERS_EXAMPLE,
        help_text="A JSON list: name, type (integer, number, choice, boolean, text, dataset), "
        "label, help, default, min, max, choices, max_length, and argument (--epochs: the job "
        "gets --epochs=VALUE) or environment (a variable). Each value is checked against its "
        "type and bounds before a job is made.",
    )
    card = forms.CharField(
        required=False,
        max_length=MAX_CARD_CHARACTERS,
        widget=forms.Textarea(attrs={"rows": 8}),
        help_text="Markdown: what it does, what data it wants, what it writes. HTML is shown "
        "as text.",
    )

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["lab"].queryset = labs_led_by(user)
        self.fields["software"].widget.choices = [("", "The site's default")] + [
            (choice.reference, choice.label) for choice in software_choices(user)
        ]
        self.fields["datasets"].choices = [(c.reference, c.label) for c in data_choices(user)]
        self.fields["models"].choices = [(c.reference, c.label) for c in model_choices(user)]

    def clean_parameters(self):
        text = self.cleaned_data.get("parameters", "").strip()
        if not text:
            return []
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"This is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
            ) from None

    def clean_output_paths(self) -> list[str]:
        return [p.strip() for p in self.cleaned_data["output_paths"].split(",") if p.strip()]

    @property
    def resources(self) -> dict:
        data = self.cleaned_data
        return {key: data.get(key) for key in RESOURCE_DEFAULTS}


def _field_for(parameter: Parameter, user, dataset_choices) -> forms.Field:
    common = {
        "label": parameter.label,
        "help_text": parameter.help,
        "required": parameter.required and parameter.type != "boolean",
    }
    if parameter.type == "integer":
        return forms.IntegerField(
            min_value=parameter.min, max_value=parameter.max, initial=parameter.default, **common
        )
    if parameter.type == "number":
        field = forms.FloatField(
            min_value=parameter.min, max_value=parameter.max, initial=parameter.default, **common
        )
        field.widget.attrs["step"] = "any"
        return field
    if parameter.type == "choice":
        return forms.ChoiceField(
            choices=[(c, c) for c in parameter.choices], initial=parameter.default, **common
        )
    if parameter.type == "boolean":
        return forms.BooleanField(initial=parameter.default, **common)
    if parameter.type == "dataset":
        return forms.ChoiceField(choices=[("", "Choose a dataset")] + dataset_choices, **common)
    return forms.CharField(max_length=parameter.max_length, initial=parameter.default, **common)


class TemplateRunForm(forms.Form):
    """The template's parameters as typed fields, then the job's name and lab."""

    def __init__(
        self, *args, user, parameters: list[Parameter], default_name: str, **kwargs
    ) -> None:
        super().__init__(*args, **kwargs)
        dataset_choices = [(c.reference, c.label) for c in data_choices(user)]
        self.parameter_names = [parameter.name for parameter in parameters]
        for parameter in parameters:
            self.fields[parameter.name] = _field_for(parameter, user, dataset_choices)
            self.fields[parameter.name].widget.attrs["data-parameter"] = parameter.name
        self.fields["run_name"] = forms.CharField(
            label="Job name",
            required=False,
            max_length=200,
            initial=default_name,
            help_text="How the job is listed.",
        )
        labs = Lab.objects.filter(memberships__user=user)
        if labs.count() > 1:
            self.fields["lab"] = forms.ModelChoiceField(
                queryset=labs, empty_label=None, help_text="The lab charged for it."
            )

    @property
    def values(self) -> dict:
        return {name: self.cleaned_data.get(name) for name in self.parameter_names}


class ModelServeForm(forms.Form):
    template = forms.ChoiceField(
        label="Serve with", help_text="A template whose serve command runs the model."
    )

    def __init__(self, *args, templates, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["template"].choices = [
            (str(version.pk), f"{version.title} ({version.reference})") for version in templates
        ]
