from __future__ import annotations

import json

from rest_framework import serializers

from labs.models import Visibility
from model_registry.selectors import card_html
from model_registry.web import PublishedVersionSerializer, card_field

from ..models import TEMPLATE_NAME_HELP, TEMPLATE_NAME_PATTERN, TemplateVersion


# A version as the catalogue lists it (a comment, not a docstring: drf-spectacular would
# copy a docstring into each schema component).
class TemplateVersionSummarySerializer(PublishedVersionSerializer):
    reference = serializers.CharField(help_text="LAB/NAME@VERSION, as the CLI names it.")
    name = serializers.CharField(source="template.name", help_text="The template's name.")
    lab = serializers.CharField(source="template.lab.name", help_text="Its lab.")

    class Meta:
        model = TemplateVersion
        fields = [
            "reference",
            "name",
            "lab",
            "number",
            "title",
            "visibility",
            "parameters",
            "published_by",
            "created_at",
        ]
        extra_kwargs = {
            **PublishedVersionSerializer.Meta.extra_kwargs,
            "title": {"help_text": "What students see."},
            "visibility": {"help_text": "Who may see and run it: private, lab or site."},
            "parameters": {
                "help_text": "The form: each parameter's name, type, label, help, "
                "default, min, max, choices, max_length, required, and how it "
                "reaches the job (argument or environment)."
            },
        }


class TemplateVersionSerializer(TemplateVersionSummarySerializer):
    card_html = serializers.SerializerMethodField(help_text="The card, as cleaned HTML.")
    runs = serializers.SerializerMethodField(help_text="Jobs started from this version.")

    class Meta(TemplateVersionSummarySerializer.Meta):
        fields = [
            *TemplateVersionSummarySerializer.Meta.fields,
            "card",
            "card_html",
            "project_name",
            "project_sha256",
            "project_size",
            "entry_command",
            "serve_command",
            "software",
            "datasets",
            "input_models",
            "resources",
            "runs",
        ]
        extra_kwargs = {
            **TemplateVersionSummarySerializer.Meta.extra_kwargs,
            "card": {"help_text": "The card as written, in Markdown."},
            "project_name": {"help_text": "The project file as stored."},
            "project_sha256": {"help_text": "Its SHA-256."},
            "project_size": {"help_text": "Its bytes."},
            "entry_command": {"help_text": "How a run starts; the parameters follow."},
            "serve_command": {"help_text": "How a model is served with it; empty: never."},
            "software": {"help_text": "The environment every run uses."},
            "datasets": {"help_text": "Datasets every run gets."},
            "input_models": {"help_text": "Published models every run gets."},
            "resources": {
                "help_text": "gpus, gpu_memory_gb, cpus, memory_mb, disk_mb, "
                "max_runtime_s, output_paths."
            },
        }

    def get_card_html(self, version: TemplateVersion) -> str:
        return str(card_html(version.card))

    def get_runs(self, version: TemplateVersion) -> int:
        return version.runs.count()


class JSONTextField(serializers.JSONField):
    """JSON, also when a multipart form sends it as text."""

    def to_internal_value(self, data):
        if isinstance(data, str):
            try:
                data = json.loads(data) if data.strip() else None
            except json.JSONDecodeError as exc:
                raise serializers.ValidationError(f"This is not JSON: {exc.msg}.") from None
        return super().to_internal_value(data)


class TemplatePublishSerializer(serializers.Serializer):
    lab = serializers.CharField(max_length=100, help_text="The lab, by name; you lead it.")
    name = serializers.RegexField(
        TEMPLATE_NAME_PATTERN,
        max_length=80,
        error_messages={"invalid": TEMPLATE_NAME_HELP},
        help_text="The template's name in its lab; an existing one gets a new version.",
    )
    title = serializers.CharField(max_length=120, help_text="What students see.")
    project = serializers.FileField(help_text="A Python script or a project archive.")
    entry_command = serializers.CharField(
        max_length=1000,
        help_text="How a run starts, e.g. python train.py; the parameters' arguments follow.",
    )
    serve_command = serializers.CharField(
        max_length=1000,
        required=False,
        allow_blank=True,
        default="",
        help_text="How a model made by this template is served, e.g. python serve.py.",
    )
    software = serializers.CharField(
        max_length=120,
        required=False,
        allow_blank=True,
        default="",
        help_text="The environment every run uses (NAME@VERSION); empty: the site's.",
    )
    datasets = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=list,
        help_text="Datasets every run gets (NAME or NAME@VERSION).",
    )
    models = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=list,
        help_text="Published models every run gets (LAB/NAME@VERSION).",
    )
    resources = JSONTextField(
        required=False,
        default=dict,
        help_text="gpus, gpu_memory_gb, cpus, memory_mb, disk_mb, max_runtime_s, output_paths.",
    )
    parameters = JSONTextField(
        required=False,
        default=list,
        help_text="The parameter form: a list of objects (docs/job-templates.md).",
    )
    card = card_field()
    visibility = serializers.ChoiceField(
        choices=Visibility.choices,
        default=Visibility.LAB,
        help_text="Who may see and run it: private, lab or site.",
    )


class TemplateRunSerializer(serializers.Serializer):
    parameters = serializers.DictField(
        required=False,
        default=dict,
        help_text="Each parameter's value by name; text is "
        'converted ("3" for an integer). Left out: its default.',
    )
    name = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=200,
        help_text="The job's name; empty: the template's title.",
    )
    lab = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=100,
        help_text="The lab to charge, by name; empty: your first.",
    )


class ModelServeSerializer(serializers.Serializer):
    template = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=200,
        help_text="LAB/NAME[@VERSION] of a template with a serve command; empty: the one "
        "that made the model, else the first that can serve it.",
    )
