from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class AccessToken(models.Model):
    """A personal access token for the API and the CLI. Only its SHA-256 is kept."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens"
    )
    name = models.CharField(max_length=100)
    # The first characters of the token, shown so that a user can tell tokens apart.
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and not self.is_expired

    @property
    def status(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.is_expired else "active"


class Registration(models.Model):
    """A self-registered account: it may sign in at once, and submit once approved.

    Accounts made by admins (or, later, by campus sign-on) have no Registration and are
    approved by definition.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="registration"
    )
    # The lab the user asked to join; its leads may approve them.
    lab = models.ForeignKey(
        "labs.Lab", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.CharField(max_length=300, blank=True, help_text="What they want to run.")
    created_at = models.DateTimeField(auto_now_add=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.user} ({'approved' if self.is_approved else 'waiting'})"

    @property
    def is_approved(self) -> bool:
        return self.approved_at is not None


class CampusIdentity(models.Model):
    """Who a user is at the campus's OpenID Connect provider: its subject, which never
    changes and is never reassigned. A later sign-on finds the account by it, not by an
    e-mail address, which anyone may have typed into a registration form."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="campus_identities"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="one_account_per_subject")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
