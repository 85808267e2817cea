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

    class Meta:
        ordering = ["workstation"]

    def __str__(self) -> str:
        return f"forecast for {self.workstation}"
