"""Maintenance drains: stop accepting submissions, with a banner, while the rest runs on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from audit.services import audit_record

from .models import Drain

DEFAULT_MESSAGE = "Nightshift is down for maintenance: new jobs cannot be submitted for now."
# Every page and submission asks; the answer is cached briefly, and dropped when it changes.
_CACHE_KEY = "operations:drain"
_CACHE_S = 5


@dataclass(frozen=True)
class DrainState:
    active: bool
    message: str = ""
    started_at: datetime | None = None


def drain_state() -> DrainState:
    cached = cache.get(_CACHE_KEY)
    if cached is None:
        row = Drain.objects.filter(pk=1).first()
        cached = (
            DrainState(active=True, message=row.message, started_at=row.started_at)
            if row is not None and row.active
            else DrainState(active=False)
        )
        cache.set(_CACHE_KEY, cached, _CACHE_S)
    return cached


def drain_forget_cached() -> None:
    cache.delete(_CACHE_KEY)


def drain_start(*, message: str = "", actor=None) -> DrainState:
    message = " ".join(message.split())[:500] or DEFAULT_MESSAGE
    with transaction.atomic():
        Drain.objects.update_or_create(
            pk=1, defaults={"active": True, "message": message, "started_at": timezone.now(),
                            "started_by": actor if getattr(actor, "pk", None) else None},
        )  # fmt: skip
        audit_record(action="portal.drain", actor=actor, detail=message)
    drain_forget_cached()
    return drain_state()


def drain_stop(*, actor=None) -> DrainState:
    with transaction.atomic():
        was_active = Drain.objects.filter(pk=1, active=True).update(active=False)
        if was_active:
            audit_record(action="portal.undrain", actor=actor)
    drain_forget_cached()
    return drain_state()
