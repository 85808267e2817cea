from django.conf import settings
from django.db import models


class AuditEntry(models.Model):
    """Who did what to which object, when, and from where. Written once, never edited."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # The actor's username when it happened (kept if the account is deleted or renamed).
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=40, db_index=True)  # e.g. job.cancel, token.create
    target_type = models.CharField(max_length=40, blank=True)  # job, token, lab, membership
    target_id = models.CharField(max_length=64, blank=True)
    target_label = models.CharField(max_length=300, blank=True)
    detail = models.TextField(blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    # The first characters of the API token used, when the action came through the API.
    token_prefix = models.CharField(max_length=16, blank=True)
    via = models.CharField(max_length=10, blank=True)  # web, api, admin, system

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"
        indexes = [models.Index(fields=["target_type", "target_id"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_name or 'system'} {self.action}"
