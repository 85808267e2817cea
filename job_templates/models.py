"""A lab's job templates: names, their immutable versions, and the jobs run from them."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from labs.models import Visibility
from model_registry.models import MODEL_NAME_HELP, MODEL_NAME_PATTERN, PublishedName, lab_slug

# A template is typed in the CLI (nightshift run LAB/NAME@VERSION) as a model is, by the
# same rule.
TEMPLATE_NAME_PATTERN, TEMPLATE_NAME_HELP = MODEL_NAME_PATTERN, MODEL_NAME_HELP


class JobTemplate(PublishedName):
    lab = models.ForeignKey("labs.Lab", on_delete=models.CASCADE, related_name="job_templates")

    class Meta(PublishedName.Meta):
        constraints = [
            models.UniqueConstraint(fields=["lab", "name"], name="template_name_unique_per_lab"),
        ]


class TemplateVersion(models.Model):
    """One published version: the project (an uploaded script or archive, kept by content
    in the datasets' store), how it starts, its software, data and resources, and the
    parameter form students fill in. Nothing of it changes once it is published."""

    template = models.ForeignKey(JobTemplate, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    title = models.CharField(
        max_length=120, help_text="What students see: 'Fine-tune a text classifier'."
    )
    card = models.TextField(blank=True, help_text="Markdown, shown cleaned of any HTML.")
    visibility = models.CharField(max_length=10, choices=Visibility.choices, default=Visibility.LAB)
    # The project as the lead uploaded it (train.py, project.tar.gz), stored by its SHA-256.
    project_name = models.CharField(max_length=200)
    project_sha256 = models.CharField(max_length=64, db_index=True)
    project_size = models.BigIntegerField()
    entry_command = models.CharField(max_length=1000)
    # A command that serves a model this template made (python serve.py): a published model
    # starts with it as a live session. Empty: the template serves nothing.
    serve_command = models.CharField(max_length=1000, blank=True)
    software = models.CharField(max_length=120, blank=True)
    datasets = models.JSONField(default=list, blank=True)
    input_models = models.JSONField(default=list, blank=True)
    # JobSpec's resources: gpus, gpu_memory_gb, cpus, memory_mb, disk_mb, max_runtime_s,
    # output_paths.
    resources = models.JSONField(default=dict)
    # parameters.parameters_to_json(): the form students fill in.
    parameters = models.JSONField(default=list, blank=True)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["template", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["template", "number"], name="template_version_number"),
        ]

    def __str__(self) -> str:
        return self.reference

    @property
    def reference(self) -> str:
        """LAB/NAME@VERSION, as the CLI takes it."""
        return f"{lab_slug(self.template.lab)}/{self.template.name}@{self.number}"


class TemplateRun(models.Model):
    """A job started from a template version, with the values it was given: the usage
    counts, and the template a model made by the job can be served with."""

    version = models.ForeignKey(TemplateVersion, on_delete=models.CASCADE, related_name="runs")
    job = models.OneToOneField(
        "jobs.Job", null=True, on_delete=models.SET_NULL, related_name="template_run"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    values = models.JSONField(default=dict)
    # What the run was for: training (the entry command) or serving a model.
    purpose = models.CharField(
        max_length=10, default="train", choices=[("train", "train"), ("serve", "serve")]
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.purpose} run of template version {self.version_id}"
