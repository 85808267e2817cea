"""Opening a job's live services: the ticket that lets a browser in, tokens for programs,
sharing. Each change writes its audit record."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from audit.services import audit_record
from jobs.models import Job

from .models import LiveShare, LiveToken, token_digest

TICKET_SALT = "nightshift.live.ticket"
COOKIE_SALT = "nightshift.live.cookie"
# A ticket travels in one redirect: from the portal's page to the live proxy.
TICKET_MAX_AGE_S = 60
MAX_TOKENS_PER_JOB = 10


class LiveError(Exception):
    """A refusal the user can act on."""


def live_ticket(*, user, job: Job, service: str, bind: str) -> str:
    """What the portal hands the proxy, through the browser, to say who opens what. It
    lets one browser in once: its nonce is spent on first use (live_ticket_read), and
    `bind` is the SHA-256 of a secret the proxy gave that browser alone, in a cookie, just
    before (bind_digest): a ticket read off a URL opens nothing in another browser."""
    audit_record(action="live.open", actor=user, target=job, detail=service)
    return signing.dumps(
        {
            "u": user.pk,
            "j": str(job.public_id),
            "s": service,
            "h": user.get_session_auth_hash(),
            "n": secrets.token_urlsafe(16),
            "b": bind,
        },
        salt=TICKET_SALT,
        compress=True,
    )


def bind_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def live_ticket_read(ticket: str, *, public_id: str, service: str, bound_to: str) -> int | None:
    """The user a ticket names, if it is fresh, for this job and service, and not used
    before: a ticket read from a URL (a log, a history, a page's script) after its browser
    came in opens nothing. The spent nonces are in the shared cache, so every proxy
    process knows them, for as long as the ticket could be fresh."""
    try:
        value = signing.loads(ticket, salt=TICKET_SALT, max_age=TICKET_MAX_AGE_S)
    except signing.BadSignature:
        return None
    if not isinstance(value, dict) or value.get("j") != public_id or value.get("s") != service:
        return None
    if not bound_to or not secrets.compare_digest(str(value.get("b", "")), bind_digest(bound_to)):
        return None
    nonce = value.get("n")
    if not isinstance(nonce, str) or not nonce:
        return None
    if not cache.add(f"live-ticket-spent:{nonce}", 1, timeout=TICKET_MAX_AGE_S + 5):
        return None
    return _user_if_current(value)


def live_cookie(*, user_id: int, session_hash: str, public_id: str) -> str:
    return signing.dumps({"u": user_id, "j": public_id, "h": session_hash}, salt=COOKIE_SALT)


def live_cookie_read(value: str, *, public_id: str) -> int | None:
    try:
        found = signing.loads(value, salt=COOKIE_SALT, max_age=settings.LIVE_COOKIE_MAX_AGE_S)
    except signing.BadSignature:
        return None
    if not isinstance(found, dict) or found.get("j") != public_id:
        return None
    return _user_if_current(found)


def _user_if_current(value: dict) -> int | None:
    """The user, unless their password changed (which signs out every session) since."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=value.get("u"), is_active=True).first()
    if user is None or not secrets.compare_digest(
        str(value.get("h", "")), user.get_session_auth_hash()
    ):
        return None
    return user.pk


def live_token_create(*, user, job: Job, name: str) -> tuple[LiveToken, str]:
    """A token for programs to call the job's served endpoint; the secret is shown once."""
    name = " ".join((name or "").split())[:100] or "program"
    if "serve" not in job.live_services:
        raise LiveError("This job does not serve HTTP: submit it with Serve turned on.")
    if job.live_tokens.filter(revoked_at__isnull=True).count() >= MAX_TOKENS_PER_JOB:
        raise LiveError(f"A job has at most {MAX_TOKENS_PER_JOB} tokens: revoke one first.")
    secret = LiveToken.PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = LiveToken.objects.create(
            job=job,
            user=user,
            name=name,
            hint=secret[len(LiveToken.PREFIX) :][:8],
            digest=token_digest(secret),
        )
        audit_record(action="live.token_create", actor=user, target=job, detail=name)
    return token, secret


def live_token_revoke(*, user, token: LiveToken) -> None:
    with transaction.atomic():
        LiveToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
        audit_record(action="live.token_revoke", actor=user, target=token.job, detail=token.name)


def live_share_set(*, user, job: Job, shared: bool) -> None:
    """Lets (or stops letting) the leads of the job's lab and the admins open it."""
    with transaction.atomic():
        if shared:
            _, created = LiveShare.objects.get_or_create(job=job, defaults={"shared_by": user})
        else:
            created = bool(LiveShare.objects.filter(job=job).delete()[0])
        if created:
            audit_record(action="live.share" if shared else "live.unshare", actor=user, target=job)
