from __future__ import annotations

from django.db import models

from .context import current_origin
from .context import note_token as note_token
from .middleware import client_ip as client_ip
from .models import AuditEntry


def audit_record(
    *,
    action: str,
    actor=None,
    target: models.Model | None = None,
    detail: str = "",
    target_label: str | None = None,
) -> AuditEntry:
    """One line of the audit log, with where the current request came from."""
    origin = current_origin()
    actor = actor if getattr(actor, "is_authenticated", False) else None
    return AuditEntry.objects.create(
        actor=actor,
        actor_name=actor.get_username() if actor else "",
        action=action,
        target_type=target._meta.model_name if target is not None else "",
        target_id=str(getattr(target, "public_id", None) or getattr(target, "pk", "") or "")
        if target is not None
        else "",
        target_label=(target_label if target_label is not None else str(target or ""))[:300],
        detail=detail,
        ip=origin.ip,
        token_prefix=origin.token_prefix,
        via=origin.via,
    )
