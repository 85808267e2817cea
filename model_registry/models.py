"""A lab's published models: names, and the immutable versions published under them."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from labs.models import Visibility

# A model's name is a folder in every job that uses it (models/<name>/) and is typed in the
# CLI (LAB/NAME@VERSION): letters, digits and . _ - only, as a dataset's.
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$"
MODEL_NAME_HELP = "Use letters, digits and . _ -, starting with a letter or digit."


class PublishedName(models.Model):
    """A name in a lab under which versions are published (a model's, a job template's); it
    holds nothing else, so that what a version says can never change after it is published.
    Each kind adds its lab, under its own related name, and its uniqueness in the lab."""

    name = models.CharField(
        max_length=80, validators=[RegexValidator(MODEL_NAME_PATTERN, MODEL_NAME_HELP)]
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ["lab__name", "name"]

    def __str__(self) -> str:
        return self.name


class Model(PublishedName):
    lab = models.ForeignKey("labs.Lab", on_delete=models.CASCADE, related_name="models")

    class Meta(PublishedName.Meta):
        constraints = [
            models.UniqueConstraint(fields=["lab", "name"], name="model_name_unique_per_lab"),
        ]


class ModelVersion(models.Model):
    """One published version: its files (a canonical archive, kept by content like a
    dataset's), its card, the metrics and lineage of the job that made it, and who may see
    it. Nothing of it changes once it is published."""

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    card = models.TextField(blank=True, help_text="Markdown, shown cleaned of any HTML.")
    visibility = models.CharField(
        max_length=10, choices=Visibility.choices, default=Visibility.PRIVATE
    )
    sha256 = models.CharField(max_length=64, db_index=True)
    size_bytes = models.BigIntegerField()
    file_count = models.PositiveIntegerField()
    # [{"path": "model.pt", "size": 1234, "from": "outputs/model.pt"}, ...]
    files = models.JSONField(default=list)
    # {"final": {name: value}, "best": {name: {"value": v, "step": s, "goal": "min"}}}
    metrics = models.JSONField(default=dict, blank=True)
    # The job's id, name, environment, datasets and reproducibility record, as published:
    # the job may be deleted later, its lineage stays.
    lineage = models.JSONField(default=dict)
    job = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["model", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["model", "number"], name="model_version_number"),
        ]

    def __str__(self) -> str:
        return self.reference

    @property
    def reference(self) -> str:
        """LAB/NAME@VERSION, as the CLI and the job form take it."""
        return f"{lab_slug(self.model.lab)}/{self.model.name}@{self.number}"


def lab_slug(lab) -> str:
    """A lab as references name it: its HTCondor accounting group without the group_
    prefix (letters, digits and _ only), e.g. vision_robotics for 'Vision & Robotics'."""
    return lab.accounting_group.removeprefix("group_")
