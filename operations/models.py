from django.conf import settings
from django.db import models


class Drain(models.Model):
    """Maintenance: while a drain is on, the portal accepts no new submissions and every page
    shows its message. Jobs already accepted go on running. One row, the latest state."""

    active = models.BooleanField(default=False)
    message = models.CharField(max_length=500, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    def __str__(self) -> str:
        return f"drain {'on' if self.active else 'off'}"
