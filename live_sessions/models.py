from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models
from django.utils import timezone


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class LiveShare(models.Model):
    """The owner lets the leads of the job's lab and the admins open its live services."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="live_share")
    shared_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    shared_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"live services of job {self.job_id}, shared"


class LiveToken(models.Model):
    """A bearer token for programs that call one job's served endpoint (`serve`)."""

    PREFIX = "nsl_"

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="live_tokens")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    name = models.CharField(max_length=100)
    # The first characters after PREFIX, to tell tokens apart on the page.
    hint = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.PREFIX}{self.hint}… ({self.name})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
