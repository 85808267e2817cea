"""The execute-node kits' credentials: made, rotated, checked. A kit reads what the portal
publishes for its own workstations (placement figures, reservations) and nothing else, so a
kit's credential, copied to every workstation it serves, opens nothing of anyone's."""

from __future__ import annotations

import hashlib
import re
import secrets

from django.db import transaction
from django.utils import timezone

from audit.services import audit_record

from .models import KitCredential

WORKSTATION_PATTERN = re.compile(r"[A-Za-z0-9*?][A-Za-z0-9._*?-]{0,199}")


class KitCredentialError(ValueError):
    """A credential that cannot be made as asked; the message says why."""


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def kit_credential_create(
    *, label: str, workstations: list[str], actor=None
) -> tuple[KitCredential, str]:
    """A new credential for these workstations (names or patterns such as ws-*); earlier
    ones under the same label are revoked at once. The secret is returned once."""
    label = " ".join(label.split())[:100] or "execute-node kit"
    patterns = [name.strip() for name in workstations if name.strip()]
    if not patterns:
        raise KitCredentialError("Name the workstations the kit serves (names, or ws-*).")
    for pattern in patterns:
        if not WORKSTATION_PATTERN.fullmatch(pattern):
            raise KitCredentialError(f"{pattern[:80]!r} is not a workstation name or pattern.")
    secret = KitCredential.PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        revoked = kit_credentials_revoke(label=label, actor=actor)
        credential = KitCredential.objects.create(
            label=label,
            workstations=patterns,
            hint=secret[: len(KitCredential.PREFIX) + 6],
            digest=_digest(secret),
        )
        audit_record(
            action="kit.credential_create",
            actor=actor,
            target=credential,
            detail=f"{', '.join(patterns)}; {revoked} earlier revoked",
        )
    return credential, secret


def kit_credentials_revoke(*, label: str, actor=None) -> int:
    earlier = KitCredential.objects.filter(label=label, revoked_at__isnull=True)
    count = earlier.update(revoked_at=timezone.now())
    if count:
        audit_record(
            action="kit.credential_revoke", actor=actor, target=None, detail=f"{label}: {count}"
        )
    return count


def kit_credential_authenticate(secret: str) -> KitCredential | None:
    """The active credential this secret is, or None."""
    if not secret.startswith(KitCredential.PREFIX) or len(secret) > 200:
        return None
    credential = KitCredential.objects.filter(
        digest=_digest(secret), revoked_at__isnull=True
    ).first()
    if credential is not None:
        KitCredential.objects.filter(pk=credential.pk).update(last_used_at=timezone.now())
    return credential
