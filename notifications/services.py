"""Telling people what happened, once, by the channels they chose; and their choices."""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.services import audit_record
from plumbing import outbound
from plumbing.tasks import enqueue

from . import channels
from .events import DEFAULT_CHANNELS, Channel, Event
from .models import Delivery, Notification, Preference, PushSubscription, Webhook

logger = logging.getLogger(__name__)

# A delivery that failed this many times in a row is given up (the task's backoff spreads
# them over about an hour).
MOST_ATTEMPTS = 8
# What was told is kept this long: the "Lately" list, and the memory that keeps an occasion
# from being told twice (none is told again after this long).
KEPT_DAYS = 90


class NotificationError(ValueError):
    """Bad input to a preference, subscription or webhook; the message says what to fix."""


class PushOff(Exception):
    """The site has no VAPID key: browsers are not offered notifications."""


@dataclass(frozen=True)
class Occasion:
    """Something to tell one person: `key` names it, so that it is told once."""

    user: object
    event: str
    key: str
    title: str
    body: str = ""
    url: str = ""
    data: dict = field(default_factory=dict)
    # Channels asked for by the occasion itself, whatever the preferences (a job's own
    # "e-mail me when it ends").
    also: frozenset[str] = frozenset()


class Recipients:
    """What a batch of notifications needs to know of their people, read at once."""

    def __init__(self, user_ids: Iterable[int]) -> None:
        ids = set(user_ids)
        self.preferences: dict[tuple[int, str], frozenset[str]] = {
            (preference.user_id, preference.event): preference.channels
            for preference in Preference.objects.filter(user_id__in=ids)
        }
        self.subscriptions: dict[int, list[int]] = defaultdict(list)
        for user_id, pk in PushSubscription.objects.filter(user_id__in=ids).values_list(
            "user_id", "pk"
        ):
            self.subscriptions[user_id].append(pk)
        self.webhooks = set(
            Webhook.objects.filter(user_id__in=ids).values_list("user_id", flat=True)
        )
        self.push_on = channels.push_public_key() is not None

    def channels_for(self, occasion: Occasion) -> list[tuple[str, int | None]]:
        """(channel, subscription) pairs this occasion goes out on."""
        user = occasion.user
        chosen = self.preferences.get((user.pk, occasion.event), DEFAULT_CHANNELS[occasion.event])
        chosen = chosen | occasion.also
        ways: list[tuple[str, int | None]] = []
        if Channel.PUSH in chosen and self.push_on:
            ways += [(Channel.PUSH, pk) for pk in self.subscriptions.get(user.pk, [])]
        if Channel.EMAIL in chosen and user.email:
            ways.append((Channel.EMAIL, None))
        if Channel.WEBHOOK in chosen and user.pk in self.webhooks:
            ways.append((Channel.WEBHOOK, None))
        return ways


def notify(occasions: Sequence[Occasion]) -> list[Notification]:
    """Record each occasion that is new and goes out on some channel, and queue its
    deliveries once the transaction commits. An occasion told before is skipped."""
    if not occasions:
        return []
    # What was told before is skipped in one query: the scan finds the same long waits and
    # ongoing reservations every minute.
    told = set(
        Notification.objects.filter(
            user_id__in={occasion.user.pk for occasion in occasions},
            key__in={occasion.key[:200] for occasion in occasions},
        ).values_list("user_id", "key")
    )
    occasions = [o for o in occasions if (o.user.pk, o.key[:200]) not in told]
    if not occasions:
        return []
    recipients = Recipients(occasion.user.pk for occasion in occasions)
    made: list[Notification] = []
    for occasion in occasions:
        ways = recipients.channels_for(occasion)
        if not ways:
            continue
        try:
            with transaction.atomic():
                notification = Notification.objects.create(
                    user=occasion.user,
                    event=occasion.event,
                    key=occasion.key[:200],
                    title=occasion.title[:300],
                    body=occasion.body,
                    url=occasion.url,
                    data=occasion.data,
                )
        except IntegrityError:
            continue
        deliveries = Delivery.objects.bulk_create(
            Delivery(notification=notification, channel=channel, subscription_id=subscription)
            for channel, subscription in ways
        )
        for delivery in deliveries:
            transaction.on_commit(functools.partial(_enqueue_delivery, delivery.pk))
        made.append(notification)
    return made


def push_public_key() -> str | None:
    """The key browsers subscribe with, or None when browser notifications are off."""
    return channels.push_public_key()


def _enqueue_delivery(delivery_pk: int) -> None:
    enqueue("notifications.tasks.deliver", delivery_pk)


def delivery_send(delivery_pk: int) -> str:
    """Send one delivery if it is still waiting: "sent", "failed", "skipped", or "retry"
    (the task tries again later). The row stays locked while it is sent, so that a second
    copy of the task waits, then finds it sent."""
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update(of=("self",))
            .select_related("notification__user", "subscription")
            .filter(pk=delivery_pk)
            .first()
        )
        if delivery is None or delivery.state != Delivery.State.PENDING:
            return "skipped"
        delivery.attempts += 1
        try:
            _send(delivery)
        except channels.Refused as exc:
            return _fail(delivery, str(exc), gone=isinstance(exc, channels.Gone))
        except channels.TryAgain as exc:
            if delivery.attempts >= MOST_ATTEMPTS:
                return _fail(delivery, f"Gave up after {delivery.attempts} tries: {exc}")
            delivery.last_error = str(exc)[:500]
            delivery.save(update_fields=["attempts", "last_error"])
            return "retry"
        delivery.state, delivery.sent_at = Delivery.State.SENT, timezone.now()
        delivery.last_error = ""
        delivery.save(update_fields=["state", "sent_at", "attempts", "last_error"])
        return "sent"


def _send(delivery: Delivery) -> None:
    notification = delivery.notification
    if delivery.channel == Channel.EMAIL:
        channels.send_email(notification)
    elif delivery.channel == Channel.PUSH:
        if delivery.subscription is None:
            raise channels.Refused("The browser was removed.")
        channels.send_push(notification, delivery.subscription)
    else:
        webhook = Webhook.objects.filter(user=notification.user).first()
        if webhook is None:
            raise channels.Refused("The webhook was removed.")
        channels.send_webhook(notification, webhook)


def _fail(delivery: Delivery, reason: str, *, gone: bool = False) -> str:
    delivery.state, delivery.last_error = Delivery.State.FAILED, reason[:500]
    delivery.save(update_fields=["state", "attempts", "last_error"])
    if gone and delivery.subscription_id:
        logger.info("push subscription %s is gone: %s", delivery.subscription_id, reason)
        PushSubscription.objects.filter(pk=delivery.subscription_id).delete()
    return "failed"


def notifications_purge(*, now=None) -> int:
    """Forget what was told more than KEPT_DAYS ago (with its deliveries)."""
    cutoff = (now or timezone.now()) - timedelta(days=KEPT_DAYS)
    removed, _ = Notification.objects.filter(created_at__lt=cutoff).delete()
    return removed


def preferences_set(*, user, chosen: dict[str, set[str]]) -> None:
    """Each event's channels, as the settings page's boxes give them."""
    unknown = set(chosen) - set(Event.values)
    if unknown:
        raise NotificationError(f"No such event: {', '.join(sorted(unknown))}.")
    for event, channel_set in chosen.items():
        if channel_set - set(Channel.values):
            raise NotificationError(f"No such channel: {', '.join(sorted(channel_set))}.")
        Preference.objects.update_or_create(
            user=user,
            event=event,
            defaults={channel: channel in channel_set for channel in Channel.values},
        )
    audit_record(
        action="notification preferences changed",
        actor=user,
        target=user,
        detail="; ".join(
            f"{event}: {', '.join(sorted(channel_set)) or 'none'}"
            for event, channel_set in sorted(chosen.items())
        ),
    )


def push_subscription_add(*, user, subscription: object, label: str = "") -> PushSubscription:
    """Keep a browser's subscription (PushSubscription.toJSON() as the browser gives it)."""
    if not isinstance(subscription, dict) or not isinstance(subscription.get("keys"), dict):
        raise NotificationError("The browser's subscription has no keys.")
    endpoint = str(subscription.get("endpoint") or "")
    keys = subscription["keys"]
    p256dh, auth = str(keys.get("p256dh") or ""), str(keys.get("auth") or "")
    if not p256dh or not auth or len(p256dh) > 200 or len(auth) > 100:
        raise NotificationError("The browser's subscription keys are missing or too long.")
    if len(endpoint) > 1000:
        raise NotificationError("The push service's address is too long.")
    try:
        endpoint = outbound.checked_url(endpoint)
    except outbound.OutboundRefused as exc:
        raise NotificationError(f"The push service's address: {exc}") from None
    if channels.push_public_key() is None:
        raise PushOff("Browser notifications are off on this site.")
    kept, _ = PushSubscription.objects.update_or_create(
        endpoint=endpoint,
        defaults={"user": user, "p256dh": p256dh, "auth": auth, "label": label[:200]},
    )
    audit_record(action="browser notifications on", actor=user, target=user, detail=label)
    return kept


def push_subscription_remove(*, user, subscription: PushSubscription) -> None:
    if subscription.user_id != user.pk:
        raise NotificationError("That browser is not yours.")
    label = subscription.label
    subscription.delete()
    audit_record(action="browser notifications off", actor=user, target=user, detail=label)


def webhook_set(*, user, url: str) -> tuple[Webhook, str | None]:
    """Point the person's notifications at `url`; a new webhook gets a new secret, which is
    returned (shown once). The URL's address is checked now and again at each delivery."""
    try:
        url = outbound.checked_url(url)
        outbound.target(url, allow=settings.NOTIFY_URL_ALLOW, setting=channels.WEBHOOK_SETTING)
    except outbound.OutboundRefused as exc:
        raise NotificationError(str(exc)) from None
    if len(url) > 1000:
        raise NotificationError("The URL is too long.")
    webhook = Webhook.objects.filter(user=user).first()
    secret = None
    if webhook is None:
        secret = channels.new_webhook_secret()
        webhook = Webhook.objects.create(user=user, url=url, secret=secret)
    else:
        webhook.url, webhook.last_status = url, ""
        webhook.save(update_fields=["url", "last_status"])
    audit_record(action="webhook set", actor=user, target=user, detail=url)
    return webhook, secret


def webhook_secret_rotate(*, user) -> str:
    webhook = Webhook.objects.get(user=user)
    webhook.secret = channels.new_webhook_secret()
    webhook.save(update_fields=["secret"])
    audit_record(action="webhook secret changed", actor=user, target=user, detail=webhook.url)
    return webhook.secret


def webhook_remove(*, user) -> None:
    removed, _ = Webhook.objects.filter(user=user).delete()
    if removed:
        audit_record(action="webhook removed", actor=user, target=user)


def notification_test_send(*, user) -> Notification | None:
    """A notification by every channel the person has set up, to see that they arrive."""
    now = timezone.now()
    made = notify(
        [
            Occasion(
                user=user,
                event=Event.JOB_ENDED,
                key=f"test:{now.timestamp()}",
                title="A test from Nightshift",
                body="Notifications reach you here.",
                url="/notifications/",
                also=frozenset(Channel.values),
            )
        ]
    )
    return made[0] if made else None
