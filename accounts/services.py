"""Everything that changes an account's access tokens."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from audit.services import audit_record

from .models import AccessToken
from .selectors import token_list_active

TOKEN_PREFIX = "nst_"  # noqa: S105 - marks a string as a Nightshift token, not a secret
MAX_TOKEN_NAME = 100
MAX_EXPIRY_DAYS = 3650


class TokenError(Exception):
    """A token request refused; `field` names the input, `code` says what kind of refusal."""

    def __init__(self, field: str | None, message: str, *, code: str = "invalid") -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.code = code


@dataclass(frozen=True)
class NewToken:
    token: AccessToken
    secret: str  # shown once; never stored


def token_digest(secret: str) -> str:
    # Tokens are 256 random bits: a fast hash is safe, unlike for passwords.
    return hashlib.sha256(secret.encode()).hexdigest()


def token_create(*, user, name: str, expires_in_days: int | None = None, actor=None) -> NewToken:
    """A new token for `user`; the secret is returned once and only its digest is kept."""
    name = (name or "").strip()
    if not name:
        raise TokenError("name", "Give the token a name, e.g. “laptop CLI”.")
    if len(name) > MAX_TOKEN_NAME or not name.isprintable():
        raise TokenError("name", f"Use up to {MAX_TOKEN_NAME} printable characters.")
    if expires_in_days is not None and not 1 <= expires_in_days <= MAX_EXPIRY_DAYS:
        raise TokenError("expires_in_days", f"Choose 1 to {MAX_EXPIRY_DAYS} days, or no expiry.")
    with transaction.atomic():
        # Serialises one user's token creations, so that the hourly limit holds under races.
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        hour_ago = timezone.now() - timedelta(hours=1)
        recent = AccessToken.objects.filter(user=user, created_at__gte=hour_ago).count()
        if recent >= settings.TOKENS_PER_HOUR:
            raise TokenError(
                None,
                f"You created {recent} tokens in the last hour; try again later.",
                code="throttled",
            )
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = AccessToken.objects.create(
            user=user,
            name=name,
            prefix=secret[: len(TOKEN_PREFIX) + 6],
            digest=token_digest(secret),
            expires_at=timezone.now() + timedelta(days=expires_in_days)
            if expires_in_days
            else None,
        )
        expiry = f"expires {token.expires_at:%Y-%m-%d}" if token.expires_at else "no expiry"
        audit_record(
            action="token.create",
            actor=actor or user,
            target=token,
            detail=f"For {user.get_username()}; {expiry}",
        )
    return NewToken(token=token, secret=secret)


def token_revoke(*, token: AccessToken, actor) -> AccessToken:
    if token.revoked_at is not None:
        return token
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    audit_record(
        action="token.revoke", actor=actor, target=token, detail=f"For {token.user.get_username()}"
    )
    return token


def password_changed(*, user, revoke_tokens: bool) -> int:
    """After a new password (the reset's or the account page's): the audit line, and, when
    asked, every active API token revoked. Other sessions end by themselves: Django checks
    each against the password's hash, and so does the live proxy's cookie. Returns the
    number of tokens revoked."""
    revoked = 0
    with transaction.atomic():
        if revoke_tokens:
            revoked = token_list_active(user).update(revoked_at=timezone.now())
        audit_record(
            action="account.password_change",
            actor=user,
            target=user,
            detail=f"{revoked} API token{'s' * (revoked != 1)} revoked",
        )
    return revoked


# How often a token's "last used" time is written: not on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@sensitive_variables("secret")
def token_authenticate(secret: str) -> AccessToken | None:
    """The active token with this secret, or None. Records when it was last used."""
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
        return None
    token = (
        AccessToken.objects.select_related("user")
        .filter(digest=token_digest(secret), revoked_at__isnull=True)
        .first()
    )
    if token is None or token.is_expired or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        AccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
