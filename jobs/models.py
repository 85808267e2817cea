from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from condor_bridge.explain import HoldExplanation, HoldUsage, explain_hold


class JobState(models.TextChoices):
    QUEUED = "queued", "Waiting for the scheduler"
    IDLE = "idle", "Idle"
    RUNNING = "running", "Running"
    TRANSFERRING = "transferring", "Transferring files"
    SUSPENDED = "suspended", "Suspended"
    HELD = "held", "Held"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    REMOVED = "removed", "Removed"


FINAL_STATES = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.REMOVED})


class JobOutcome(models.TextChoices):
    """How a job that ended did so, for reports: removed jobs split by who removed them."""

    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    RUNTIME_LIMIT = "runtime_limit", "Removed by the runtime limit"
    REMOVED = "removed", "Removed by HTCondor or an admin"


def is_public_id(text: str) -> bool:
    """Whether text is a job's public id as HTCondor's ads carry it (a UUID's text form):
    what may be looked up as one."""
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


class Job(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs"
    )
    name = models.CharField(max_length=200)
    # The lab whose quota and HTCondor accounting group the job counts against; none for a
    # user in no lab (the site's default quota).
    lab = models.ForeignKey(
        "labs.Lab", null=True, blank=True, on_delete=models.PROTECT, related_name="jobs"
    )
    # GPUs asked for (also in `request`), as a column so that usage sums in the database.
    gpus = models.PositiveSmallIntegerField(default=0)
    # The request exactly as submitted: the fields of condor_bridge.JobRequest.
    request = models.JSONField(default=dict)
    # Where its files came from: {"kind": "script"} or {"kind": "archive", "archive": name,
    # "entry_command": "python train.py ..."}; used by clone and re-run.
    source = models.JSONField(default=dict)
    state = models.CharField(max_length=20, choices=JobState.choices, default=JobState.QUEUED)
    outcome = models.CharField(max_length=20, choices=JobOutcome.choices, blank=True)
    status_detail = models.CharField(max_length=500, blank=True)
    # The schedd the job goes to, by its collector name, chosen once when the job is made so
    # that every attempt and action reaches the same one; "": the default schedd.
    schedd = models.CharField(max_length=200, blank=True, default="", db_default="")
    cluster_id = models.PositiveIntegerField(null=True, blank=True)
    proc_id = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    exit_signal = models.IntegerField(null=True, blank=True)
    hold_reason = models.TextField(blank=True)
    hold_reason_code = models.IntegerField(null=True, blank=True)
    hold_reason_subcode = models.IntegerField(null=True, blank=True)
    # What a held job had used by then (HTCondor's figures), for the hold's explanation.
    hold_memory_mb = models.PositiveIntegerField(null=True, blank=True)
    hold_disk_mb = models.PositiveIntegerField(null=True, blank=True)
    num_starts = models.PositiveIntegerField(default=0)
    workstation = models.CharField(max_length=200, blank=True)
    # The pool `workstation` is in when the job flocked there (FLOCK_TO): its central
    # manager as HTCondor names it (RemotePool); "" for the home pool.
    pool = models.CharField(max_length=200, blank=True, default="", db_default="")
    gpu_model = models.CharField(max_length=200, blank=True)
    # Why no workstation can run this job, when the pool has none that matches.
    match_problem = models.CharField(max_length=500, blank=True)
    # Why a job that some workstation could run is still waiting (all busy, owners back).
    wait_reason = models.CharField(max_length=500, blank=True)
    output_dir = models.CharField(max_length=500)
    outputs_collected_at = models.DateTimeField(null=True, blank=True)
    # When `manage.py purge_outputs` removed the output files under a retention policy.
    outputs_purged_at = models.DateTimeField(null=True, blank=True)
    notify_by_email = models.BooleanField(default=False)
    submit_attempts = models.PositiveIntegerField(default=0)
    # When a submission task last showed signs of life for this job (an attempt, or the
    # reconciler sending one): a queued job silent for longer lost its task.
    submit_requested_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # A run of a sweep: submitted with the sweep's other runs as one HTCondor cluster.
    # (experiments.Sweep is named, not imported: jobs' code never follows this key, only the
    # job page's template shows the sweep's name.)
    sweep = models.ForeignKey(
        "experiments.Sweep", null=True, blank=True, on_delete=models.CASCADE, related_name="runs"
    )
    sweep_index = models.PositiveIntegerField(null=True, blank=True)
    parameters = models.JSONField(default=dict, blank=True)
    # The reproducibility record, besides `request` and `source`: the submit description as
    # sent to HTCondor, and the job this one re-runs exactly.
    submit_description = models.TextField(blank=True)
    # A notebook session's Jupyter token: in the job's folder (mode 0600) and here, for the
    # live proxy to add to the requests it lets in. Never shown, never in the job's ad.
    live_secret = models.CharField(max_length=64, blank=True, editable=False, db_default="")
    reproduces = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reproductions"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["state"]),
            models.Index(fields=["owner", "-created_at"]),
            models.Index(fields=["lab", "started_at"]),
            models.Index(fields=["finished_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.public_id})"

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def is_submitted(self) -> bool:
        return self.cluster_id is not None

    @property
    def can_cancel(self) -> bool:
        return not self.is_final

    @property
    def starts(self) -> int:
        """Runs so far; HTCondor counts the current run only once its shadow reports."""
        return max(self.num_starts, 1 if self.state == JobState.RUNNING else 0)

    @property
    def can_hold(self) -> bool:
        return self.is_submitted and self.state in (
            JobState.IDLE,
            JobState.RUNNING,
            JobState.SUSPENDED,
        )

    @property
    def can_release(self) -> bool:
        return self.state == JobState.HELD

    @property
    def ran_on(self) -> str:
        """Its workstation, and the pool that workstation is in when the job flocked."""
        if not self.workstation:
            return ""
        return f"{self.workstation} (in the pool at {self.pool})" if self.pool else self.workstation

    @property
    def condor_id(self) -> str:
        return f"{self.cluster_id}.{self.proc_id}" if self.is_submitted else ""

    @property
    def directory(self) -> Path:
        return Path(self.output_dir)

    @property
    def outputs_ready(self) -> bool:
        return self.outputs_collected_at is not None

    @property
    def queued_for(self) -> timedelta | None:
        """From acceptance until its (latest) start, or until now while it waits."""
        if self.started_at:
            return max(self.started_at - self.created_at, timedelta(0))
        if self.is_final:
            return None
        return timezone.now() - self.created_at

    @property
    def ran_for(self) -> timedelta | None:
        if not self.started_at:
            return None
        end = self.finished_at or (None if self.is_final else timezone.now())
        return max(end - self.started_at, timedelta(0)) if end else None

    @property
    def hold_explanation(self) -> HoldExplanation | None:
        if self.state != JobState.HELD:
            return None
        return explain_hold(
            self.hold_reason_code,
            self.hold_reason_subcode,
            self.hold_reason,
            used=HoldUsage(
                memory_mb=self.hold_memory_mb,
                memory_requested_mb=self.request.get("memory_mb"),
                disk_mb=self.hold_disk_mb,
                disk_requested_mb=self.request.get("disk_mb"),
            ),
        )

    @property
    def hold_clone_url(self) -> str:
        """The new-job form with this job's request and the memory its hold suggests, or ""."""
        explanation = self.hold_explanation
        memory_mb = dict(explanation.suggested).get("memory_mb") if explanation else None
        if not memory_mb:
            return ""
        query = urlencode({"from": str(self.public_id), "memory_gb": f"{memory_mb / 1024:g}"})
        return f"{reverse('jobs:new')}?{query}"

    @property
    def seed(self) -> int | None:
        return self.request.get("seed")

    @property
    def image_digest(self) -> str:
        """The container image's digest, when the image is named by one."""
        image = self.request.get("container_image") or ""
        return image.split("@", 1)[1] if "@sha256:" in image else ""

    @property
    def live_services(self) -> tuple[str, ...]:
        """The web services its owner may open while it runs ("tensorboard", "serve")."""
        return tuple(self.request.get("live_services") or ())

    @property
    def gpu_summary(self) -> str:
        gpus = self.request.get("gpus") or 0
        if not gpus:
            return "CPU only"
        text = f"{gpus} GPU" + ("s" if gpus > 1 else "")
        if self.request.get("gpu_memory_gb"):
            text += f", ≥ {self.request['gpu_memory_gb']:g} GB each"
        return text


class JobEvent(models.Model):
    """One entry of a job's timeline: a state change, or an action someone took."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True)
    kind = models.CharField(max_length=40)
    state = models.CharField(max_length=20, choices=JobState.choices, blank=True)
    detail = models.TextField(blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.state}".strip()


class Workstation(models.Model):
    """A workstation the pool has reported, remembered so that one gone offline still shows."""

    name = models.CharField(max_length=200, unique=True)
    last_seen_at = models.DateTimeField()
    total_gpus = models.PositiveIntegerField(default=0)
    gpu_name = models.CharField(max_length=200, blank=True)
    gpu_memory_mb = models.PositiveIntegerField(default=0)
    gpu_capability = models.FloatField(default=0)
    total_cpus = models.PositiveIntegerField(default=0)
    total_memory_mb = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
