from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from .segments import EndedBy


class UsageRecord(models.Model):
    """One run segment of one job, from HTCondor's accounting (see accounting.segments).

    The owner and lab are copied from the job so that reports filter and group without a join.
    """

    class Ending(models.TextChoices):
        RUNNING = EndedBy.RUNNING, "Still running"
        COMPLETED = EndedBy.COMPLETED, "Completed"
        EVICTED = EndedBy.EVICTED, "Evicted"
        HELD = EndedBy.HELD, "Held"
        REMOVED = EndedBy.REMOVED, "Removed"

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="usage_records")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="usage_records"
    )
    lab = models.ForeignKey(
        "labs.Lab", null=True, blank=True, on_delete=models.PROTECT, related_name="usage_records"
    )
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    workstation = models.CharField(max_length=200, blank=True)
    # The pool the workstation is in when the run flocked there: its central manager as
    # HTCondor names it (RemotePool); "" for the home pool.
    pool = models.CharField(max_length=200, blank=True, default="", db_default="")
    gpu_model = models.CharField(max_length=200, blank=True)
    gpus = models.PositiveSmallIntegerField(default=0)
    wall_s = models.FloatField(default=0, help_text="Wall time of the run (0 while it runs).")
    committed_s = models.FloatField(default=0, help_text="Of it, work kept: completed or saved.")
    badput_s = models.FloatField(default=0, help_text="Lost to an eviction without a checkpoint.")
    saved_s = models.FloatField(
        default=0, help_text="Of committed, known from the job's checkpoint log, not HTCondor."
    )
    forgiven_s = models.FloatField(
        default=0,
        db_default=0,
        help_text="Of badput, not charged to the quota: lost when the workstation's owner "
        "asked for it back.",
    )
    # The GPUs' energy above idle in this run, once the job has ended (usage.energy).
    gpu_energy_kwh = models.FloatField(null=True, blank=True)
    co2e_kg = models.FloatField(null=True, blank=True)
    energy_simulated = models.BooleanField(default=False, db_default=False)
    # Waited before this run: since submission for the first, since the last run otherwise.
    wait_s = models.FloatField(null=True, blank=True)
    first_run = models.BooleanField(default=False)
    ended_by = models.CharField(max_length=20, choices=Ending.choices, blank=True)
    recorded_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["started_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "started_at"], name="one_record_per_run"),
        ]
        indexes = [
            models.Index(fields=["ended_at"]),
            models.Index(fields=["lab", "ended_at"]),
            models.Index(fields=["user", "ended_at"]),
            models.Index(
                fields=["started_at"], name="usage_open_runs", condition=models.Q(ended_at=None)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} on {self.workstation or '?'} from {self.started_at:%Y-%m-%d %H:%M}"

    @property
    def is_open(self) -> bool:
        return self.ended_at is None

    @property
    def wall(self) -> timedelta:
        """How long the run lasted, or has lasted so far."""
        if self.ended_at is not None:
            return timedelta(seconds=self.wall_s)
        return max(timezone.now() - self.started_at, timedelta(0))

    @property
    def lost(self) -> timedelta:
        return timedelta(seconds=self.badput_s)

    def gpu_hours(self, until: datetime | None = None) -> float:
        """Wall time x GPUs; a run still going counts up to `until` (default: now)."""
        if self.ended_at is not None:
            return self.wall_s * self.gpus / 3600
        end = until or timezone.now()
        return max((end - self.started_at).total_seconds(), 0) * self.gpus / 3600


class CapacitySample(models.Model):
    """What one workstation's GPUs were doing over one sampling interval."""

    taken_at = models.DateTimeField(help_text="Start of the interval.")
    seconds = models.PositiveIntegerField()
    workstation = models.CharField(max_length=200)
    total_gpus = models.PositiveSmallIntegerField(default=0)
    idle_gpus = models.PositiveSmallIntegerField(default=0, help_text="Free for jobs, unused.")
    nightshift_gpus = models.PositiveSmallIntegerField(default=0)
    other_gpus = models.PositiveSmallIntegerField(
        default=0, help_text="Running jobs from outside this portal."
    )
    unavailable_gpus = models.PositiveSmallIntegerField(
        default=0, help_text="Owner back, draining, or the workstation is off."
    )

    class Meta:
        ordering = ["-taken_at", "workstation"]
        constraints = [
            models.UniqueConstraint(
                fields=["workstation", "taken_at"], name="one_sample_per_interval"
            ),
        ]
        indexes = [models.Index(fields=["taken_at"])]

    def __str__(self) -> str:
        return f"{self.workstation} at {self.taken_at:%Y-%m-%d %H:%M}"


class MonthlyReport(models.Model):
    """A lab's monthly usage email, recorded so that it is sent once."""

    lab = models.ForeignKey("labs.Lab", on_delete=models.CASCADE, related_name="monthly_reports")
    month = models.DateField(help_text="The first day of the month it covers.")
    sent_at = models.DateTimeField(auto_now_add=True)
    recipients = models.TextField(blank=True)

    class Meta:
        ordering = ["-month", "lab__name"]
        constraints = [
            models.UniqueConstraint(fields=["lab", "month"], name="one_report_per_lab_month"),
        ]

    def __str__(self) -> str:
        return f"{self.lab} {self.month:%Y-%m}"


class QuotaHold(models.Model):
    """Runs accepted but not yet written as jobs: a large sweep that the worker is still
    preparing. Until its runs' rows exist, the quota counts them from here as waiting jobs,
    so that a submission racing the worker cannot take what the sweep was granted."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="quota_holds"
    )
    lab = models.ForeignKey(
        "labs.Lab", null=True, blank=True, on_delete=models.CASCADE, related_name="quota_holds"
    )
    gpus = models.PositiveSmallIntegerField(default=0, help_text="GPUs each run asks for.")
    runtime_s = models.PositiveIntegerField(
        null=True, blank=True, help_text="Each run's runtime limit, if it has one."
    )
    runs = models.PositiveIntegerField(help_text="Runs accepted whose rows are not written yet.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.runs} runs held for {self.owner}"
