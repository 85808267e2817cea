from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from .events import Channel, Event


class Preference(models.Model):
    """One person's channels for one kind of event; without a row, the defaults apply."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preferences"
    )
    event = models.CharField(max_length=40, choices=Event.choices)
    push = models.BooleanField(default=True)
    email = models.BooleanField(default=False)
    webhook = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "event"], name="one_preference_per_event")
        ]

    def __str__(self) -> str:
        return f"{self.user} · {self.event}"

    @property
    def channels(self) -> frozenset[str]:
        return frozenset(channel for channel in Channel.values if getattr(self, channel))


class PushSubscription(models.Model):
    """A browser that agreed to show this person's notifications (the Push API's
    subscription: the push service's endpoint and the keys that encrypt for it)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="push_subscriptions"
    )
    endpoint = models.URLField(max_length=1000, unique=True)
    p256dh = models.CharField(max_length=200)
    auth = models.CharField(max_length=100)
    label = models.CharField(max_length=200, blank=True, help_text="The browser, as it said.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.user}: {self.label or self.endpoint[:60]}"

    @property
    def as_subscription_info(self) -> dict:
        return {"endpoint": self.endpoint, "keys": {"p256dh": self.p256dh, "auth": self.auth}}


class Webhook(models.Model):
    """Where one person's notifications are POSTed (Slack, Teams, Matrix, their own
    receiver), signed as Standard Webhooks sign them."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_webhook"
    )
    url = models.URLField(max_length=1000)
    secret = models.CharField(max_length=200, help_text="whsec_ and the key, base64.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_status = models.CharField(max_length=300, blank=True)
    last_delivery_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user}: {self.url}"


class Notification(models.Model):
    """One thing a person is told once, whatever the channels: `key` names the occasion
    (a job's end, a session's tenth-to-last minute), and a second attempt to tell the
    same person the same thing finds the row and sends nothing."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    event = models.CharField(max_length=40, choices=Event.choices)
    key = models.CharField(max_length=200)
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True)
    url = models.CharField(max_length=500, blank=True, help_text="A path in the portal.")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="one_notification_per_occasion")
        ]
        indexes = [models.Index(fields=["created_at"], name="notification_created_at")]

    def __str__(self) -> str:
        return f"{self.user}: {self.title}"


class Delivery(models.Model):
    """A notification on its way through one channel (for the browser: to one of the
    person's subscriptions)."""

    class State(models.TextChoices):
        PENDING = "pending", "Sending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"

    notification = models.ForeignKey(
        Notification, on_delete=models.CASCADE, related_name="deliveries"
    )
    channel = models.CharField(max_length=20, choices=Channel.choices)
    subscription = models.ForeignKey(
        PushSubscription, null=True, blank=True, on_delete=models.CASCADE
    )
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["notification", "channel", "subscription"],
                name="one_delivery_per_channel",
                nulls_distinct=False,
            )
        ]

    def __str__(self) -> str:
        return f"{self.notification_id} by {self.channel}: {self.state}"
