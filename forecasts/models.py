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

    class Meta:
        ordering = ["-made_at"]
        constraints = [
            models.UniqueConstraint(fields=["job", "first"], name="one_first_and_one_current"),
        ]

    def __str__(self) -> str:
        return f"start of {self.job_id} predicted at {self.made_at:%Y-%m-%d %H:%M}"
