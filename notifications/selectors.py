"""What the notification settings page shows."""

from __future__ import annotations

from dataclasses import dataclass

from .events import DEFAULT_CHANNELS, GROUPS, Channel
from .models import Notification, Preference, PushSubscription, Webhook


@dataclass(frozen=True)
class PreferenceRow:
    event: str
    label: str
    channels: frozenset[str]


def preference_groups_for(user) -> list[tuple[str, list[PreferenceRow]]]:
    """Each group of events with the person's channels for each (the defaults where unset)."""
    kept = {
        preference.event: preference.channels for preference in Preference.objects.filter(user=user)
    }
    return [
        (
            group,
            [
                PreferenceRow(event, event.label, kept.get(event, DEFAULT_CHANNELS[event]))
                for event in events
            ],
        )
        for group, events in GROUPS.items()
    ]


def push_subscriptions_of(user) -> list[PushSubscription]:
    return list(PushSubscription.objects.filter(user=user))


def webhook_of(user) -> Webhook | None:
    return Webhook.objects.filter(user=user).first()


def notifications_recent_for(user, *, limit: int = 20) -> list[Notification]:
    return list(Notification.objects.filter(user=user).prefetch_related("deliveries")[:limit])


CHANNELS = Channel.choices
