"""Sending one notification through one channel: e-mail, a browser's push service, or a
person's webhook. Each answers Sent, or raises TryAgain (the task retries later) or Refused
(retrying would not help)."""

from __future__ import annotations

import base64
import json
import logging
import secrets
import smtplib
import time
from email.utils import parseaddr
from urllib.parse import urlsplit

import httpx
from cryptography.hazmat.primitives import serialization
from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone
from py_vapid import Vapid, VapidException
from pywebpush import WebPusher
from standardwebhooks import Webhook as Signer

from plumbing import outbound

from .models import Notification, PushSubscription, Webhook

logger = logging.getLogger(__name__)

TIMEOUT_S = 15.0
# A push service keeps a message this long for a browser that is offline.
PUSH_TTL_S = 24 * 3600
WEBHOOK_SETTING = "NIGHTSHIFT_NOTIFY_URL_ALLOW"


class TryAgain(Exception):
    """The channel failed in a way that may pass: the task retries later."""


class Refused(Exception):
    """The channel refused for good (a removed subscription, a wrong URL)."""


class Gone(Refused):
    """The browser's subscription no longer exists: it is forgotten."""


def absolute(path: str) -> str:
    return settings.PORTAL_URL.rstrip("/") + path if path else settings.PORTAL_URL


def new_webhook_secret() -> str:
    """24 random bytes as a Standard Webhooks secret: whsec_ and base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def send_email(notification: Notification) -> None:
    lines = [notification.title, ""]
    if notification.body:
        lines += [notification.body, ""]
    lines.append(absolute(notification.url))
    try:
        send_mail(
            # A title holds names people chose: never a second header line.
            subject=" ".join(f"[Nightshift] {notification.title}".split()),
            message="\n".join(lines),
            from_email=None,
            recipient_list=[notification.user.email],
        )
    except (OSError, smtplib.SMTPException) as exc:
        raise TryAgain(f"The mail server did not take it: {exc}") from None


def push_public_key() -> str | None:
    """The key browsers subscribe with (applicationServerKey), or None when the site has
    no VAPID key and the browser channel is off."""
    vapid = _vapid()
    if vapid is None:
        return None
    raw = vapid.public_key.public_bytes(
        encoding=serialization.Encoding.X962,
        format=serialization.PublicFormat.UncompressedPoint,
    )
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _vapid() -> Vapid | None:
    path = settings.VAPID_PRIVATE_KEY
    if path is None or not path.exists():
        return None
    try:
        return Vapid.from_file(private_key_file=str(path))
    except (OSError, ValueError, VapidException) as exc:
        # A damaged key turns the browser channel off instead of breaking pages.
        logger.error(
            "the VAPID key %s cannot be read (%s): browser notifications are off", path, exc
        )
        return None


def push_payload(notification: Notification) -> bytes:
    """What the service worker gets (static/js/service-worker.js shows it)."""
    return json.dumps(
        {
            "id": str(notification.public_id),
            "title": notification.title,
            "body": notification.body,
            "url": notification.url or "/",
            "tag": notification.key,
        }
    ).encode()


class _PinnedSession:
    """What pywebpush posts through (its requests_session): the request goes to the push
    service's checked address, as every URL a user gave does."""

    def post(self, url: str, *, data: bytes | None, headers, timeout: float) -> httpx.Response:
        return outbound.post(
            url,
            content=data or b"",
            headers=dict(headers),
            allow=settings.NOTIFY_URL_ALLOW,
            setting=WEBHOOK_SETTING,
            timeout=timeout,
        )


def send_push(notification: Notification, subscription: PushSubscription) -> None:
    vapid = _vapid()
    if vapid is None:
        raise Refused("The site has no VAPID key: browser notifications are off.")
    endpoint = urlsplit(subscription.endpoint)
    claims = {
        "sub": f"mailto:{parseaddr(settings.DEFAULT_FROM_EMAIL)[1] or 'nightshift@localhost'}",
        "aud": f"{endpoint.scheme}://{endpoint.netloc}",
        "exp": int(time.time()) + 12 * 3600,
    }
    pusher = WebPusher(subscription.as_subscription_info, requests_session=_PinnedSession())
    try:
        response = pusher.send(
            push_payload(notification), vapid.sign(claims), ttl=PUSH_TTL_S, timeout=TIMEOUT_S
        )
    except outbound.OutboundRefused as exc:
        raise Refused(str(exc)) from None
    except httpx.HTTPError as exc:
        raise TryAgain(f"The push service could not be reached: {exc}") from None
    status = response.status_code
    if status in (404, 410):
        raise Gone(f"The push service no longer knows this browser ({status}).")
    if status == 429 or status >= 500:
        raise TryAgain(f"The push service answered {status}.")
    if status >= 300:
        raise Refused(f"The push service refused it: {status} {response.text[:200]}")
    subscription.last_sent_at = timezone.now()
    subscription.save(update_fields=["last_sent_at"])


def webhook_body(notification: Notification) -> bytes:
    """The JSON a webhook receives. `text` is the line Slack's, Teams' and Matrix's incoming
    webhooks show; `type`, `timestamp` and `data` are Standard Webhooks' envelope."""
    url = absolute(notification.url)
    return json.dumps(
        {
            "type": notification.event,
            "timestamp": notification.created_at.isoformat(),
            "data": {
                "id": str(notification.public_id),
                "title": notification.title,
                "body": notification.body,
                "url": url,
                **notification.data,
            },
            "text": f"{notification.title}. {notification.body} {url}".replace("  ", " "),
        }
    ).encode()


def send_webhook(notification: Notification, webhook: Webhook) -> None:
    body = webhook_body(notification)
    message_id = f"msg_{notification.public_id.hex}"
    now = timezone.now()
    headers = {
        "content-type": "application/json",
        "user-agent": "Nightshift-Webhooks/1",
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Signer(webhook.secret).sign(message_id, now, body),
    }
    try:
        response = outbound.post(
            webhook.url,
            content=body,
            headers=headers,
            allow=settings.NOTIFY_URL_ALLOW,
            setting=WEBHOOK_SETTING,
            timeout=TIMEOUT_S,
        )
    except outbound.OutboundRefused as exc:
        _webhook_status(webhook, str(exc), now)
        raise Refused(str(exc)) from None
    except httpx.HTTPError as exc:
        _webhook_status(webhook, f"Not reached: {exc}", now)
        raise TryAgain(f"The webhook could not be reached: {exc}") from None
    status = response.status_code
    _webhook_status(webhook, f"{status} {response.reason_phrase}", now)
    if status in (408, 409, 425, 429) or status >= 500:
        raise TryAgain(f"The webhook answered {status}.")
    if status >= 300:
        raise Refused(f"The webhook answered {status} {response.reason_phrase}.")


def _webhook_status(webhook: Webhook, status: str, now) -> None:
    Webhook.objects.filter(pk=webhook.pk).update(last_status=status[:300], last_delivery_at=now)
