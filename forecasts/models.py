import fnmatch
import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models


class WorkstationForecast(models.Model):
    """What one workstation's history says of its owner, learnt each night: for each local
    quarter hour of the week, the chance that, free then, it stays free for each published
    duration (condor_bridge.placement.STAY_FREE_HOURS)."""

    workstation = models.CharField(max_length=200, unique=True)
    fitted_at = models.DateTimeField()
    observed_days = models.FloatField(default=0, help_text="Days of its own history seen.")
    # [quarter of the week][index of the duration] -> chance; 672 rows.
    stay_free = models.JSONField(default=list)
    # How sure each row is: "low", "medium" or "high", by quarter of the week.
    confidence = models.JSONField(default=list)
    description = models.TextField(blank=True)
    # The 15-minute history it was learnt from (one byte a slot: 1 free, 0 taken, 255
    # unknown), from history_start: start-time predictions replay possible futures from it.
    history = models.BinaryField(default=b"")
    history_start = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["workstation"]

    def __str__(self) -> str:
        return f"forecast for {self.workstation}"


class StartPrediction(models.Model):
    """When a waiting job was predicted to start: the central 80 % of its possible starts.

    Each waiting job has its first prediction (kept: once the job starts, it calibrates later
    ones) and its current one (refreshed while it waits)."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="start_predictions")
    first = models.BooleanField(default=False)
    made_at = models.DateTimeField()
    earliest = models.DateTimeField()
    likely = models.DateTimeField()
    latest = models.DateTimeField(null=True, blank=True, help_text="None: past the horizon.")
    horizon_s = models.PositiveIntegerField()
    within_horizon = models.FloatField(help_text="The share of futures it started in.")
    widened_by = models.FloatField(default=0, help_text="The calibration's widening (log).")
    interruptions = models.CharField(
        max_length=200,
        blank=True,
        default="",
        db_default="",
        help_text="Owners' expected interruptions of a run of its maximum runtime from the "
        "likely start, and the checkpoint interval suggested; empty without a maximum runtime.",
    )
    interruptions_s = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="What those interruptions and the checkpoints would add to the run, in seconds.",
    )

    class Meta:
        ordering = ["-made_at"]
        constraints = [
            models.UniqueConstraint(fields=["job", "first"], name="one_first_and_one_current"),
        ]

    def __str__(self) -> str:
        return f"start of {self.job_id} predicted at {self.made_at:%Y-%m-%d %H:%M}"


class Reservation(models.Model):
    """A lab's hold on whole workstations for a window: other labs' jobs do not start on them
    while it lasts, and the lab's own jobs go first. HTCondor enforces it: each held
    workstation's execute-node kit publishes the window in its machine ad, and the kit's START
    and RANK expressions honour it (deploy/execute-node/nightshift-execute.conf)."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    lab = models.ForeignKey("labs.Lab", on_delete=models.CASCADE, related_name="reservations")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    purpose = models.CharField(max_length=200, help_text="What it is for: a course, a demo.")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    gpus_asked = models.PositiveIntegerField(
        null=True, blank=True, help_text="The GPUs asked for; empty when workstations were named."
    )
    workstations = ArrayField(models.CharField(max_length=200), help_text="The workstations held.")
    gpus = models.PositiveIntegerField(help_text="The GPUs of the workstations held.")
    created_at = models.DateTimeField(auto_now_add=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["starts_at", "pk"]
        indexes = [models.Index(fields=["ends_at"], name="reservation_ends_at")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ends_at__gt=models.F("starts_at")),
                name="reservation_ends_after_start",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.lab} {self.starts_at:%Y-%m-%d %H:%M}: {', '.join(self.workstations)}"

    @property
    def hours(self) -> float:
        return (self.ends_at - self.starts_at).total_seconds() / 3600

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.hours

    def state_at(self, moment) -> str:
        """ "cancelled", "ended", "on" (its window holds now) or "upcoming"."""
        if self.cancelled_at is not None:
            return "cancelled"
        if moment >= self.ends_at:
            return "ended"
        return "on" if moment >= self.starts_at else "upcoming"


class KitCredential(models.Model):
    """What an execute-node kit authenticates with: not a person's token, and no account.
    It reads the placement figures and reservations of the workstations it names (names or
    shell patterns, `ws-*`) and nothing else; making a new one under the same label revokes
    the earlier ones. Only its SHA-256 is kept."""

    PREFIX = "nsk_"  # noqa: S105 - marks a string as a kit credential, not a secret

    label = models.CharField(max_length=100)
    workstations = ArrayField(models.CharField(max_length=200))
    hint = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.label} ({self.hint}…, {', '.join(self.workstations)})"

    def covers(self, workstation: str) -> bool:
        return any(fnmatch.fnmatchcase(workstation, pattern) for pattern in self.workstations)
