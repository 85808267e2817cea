from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Sweep(models.Model):
    """Many runs of the same job with different parameters, submitted as one cluster."""

    class Kind(models.TextChoices):
        GRID = "grid", "Grid: every combination"
        LIST = "list", "List of parameter sets"
        RANDOM = "random", "Random samples"
        MATRIX = "matrix", "Evaluation matrix: systems by datasets"
        STUDY = "study", "Hyperparameter optimisation (Optuna)"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sweeps"
    )
    lab = models.ForeignKey(
        "labs.Lab", null=True, blank=True, on_delete=models.PROTECT, related_name="sweeps"
    )
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    # What the user gave: {"grid": {...}}, {"rows": [...]} or {"random": {...}, "count": N,
    # "seed": S}; the runs' own parameters are on the jobs.
    definition = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    cluster_id = models.PositiveIntegerField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    submit_attempts = models.PositiveIntegerField(default=0)
    submit_requested_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # A large sweep is accepted at once and its runs written by the worker, in chunks
    # (experiments.preparation): how many it will have, how many are written, what the worker
    # makes them from, and the quota held for those not written yet.
    planned_runs = models.PositiveIntegerField(default=0, db_default=0)
    prepared_runs = models.PositiveIntegerField(default=0, db_default=0)
    # Of those, how many (from the first) have their folders whole: where the schedd sees
    # the portal's folders, a sweep's runs are submitted with their folders empty, waiting
    # in HTCondor's queue until they are filled (experiments.preparation).
    ready_runs = models.PositiveIntegerField(default=0, db_default=0)
    preparation = models.JSONField(null=True, blank=True)
    quota_hold = models.ForeignKey(
        "accounting.QuotaHold", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A study: when it stopped asking for trials and why (trials, budget, deadline, cancel).
    finished_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        # The table it had when sweeps lived in jobs: the move changed no table.
        db_table = "jobs_sweep"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.public_id})"

    @property
    def is_study(self) -> bool:
        return self.kind == self.Kind.STUDY

    @property
    def is_submitted(self) -> bool:
        return self.cluster_id is not None

    @property
    def is_preparing(self) -> bool:
        """Accepted, with runs the worker has not written yet."""
        return self.prepared_runs < self.planned_runs

    @property
    def is_filling_folders(self) -> bool:
        """Written, with runs whose folders are still being filled."""
        return self.ready_runs < self.prepared_runs

    @property
    def ready_percent(self) -> int:
        return self.ready_runs * 100 // self.prepared_runs if self.prepared_runs else 100

    @property
    def prepared_percent(self) -> int:
        return self.prepared_runs * 100 // self.planned_runs if self.planned_runs else 100
