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
# Every page and submission asks, so the state lives in the shared cache (Redis) with no
# expiry: start and stop write it there for every process at once, and the database is read
# only when the cache lost it (Redis restarted).
_CACHE_KEY = "operations:drain"


@dataclass(frozen=True)
class DrainState:
    active: bool
    message: str = ""
    started_at: datetime | None = None


def drain_state() -> DrainState:
    cached = cache.get(_CACHE_KEY)
    if cached is None:
        cached = drain_remember(_from_database())
    return cached


def submissions_paused() -> str | None:
    """The drain's message while the portal is drained (jobs.admission asks), else None."""
    state = drain_state()
    return state.message if state.active else None


def _from_database() -> DrainState:
    row = Drain.objects.filter(pk=1, active=True).first()
    if row is None:
        return DrainState(active=False)
    return DrainState(active=True, message=row.message, started_at=row.started_at)


def drain_remember(state: DrainState) -> DrainState:
    """Tell every process: start and stop do it; tests start from "not draining"."""
    cache.set(_CACHE_KEY, state, None)
    return state


def drain_start(*, message: str = "", actor=None) -> DrainState:
    message = " ".join(message.split())[:500] or DEFAULT_MESSAGE
    with transaction.atomic():
        Drain.objects.update_or_create(
            pk=1,
            defaults={
                "active": True,
                "message": message,
                "started_at": timezone.now(),
                "started_by": actor if getattr(actor, "pk", None) else None,
            },
        )
        audit_record(action="portal.drain", actor=actor, detail=message)
    return drain_remember(_from_database())


def drain_stop(*, actor=None) -> DrainState:
    with transaction.atomic():
        was_active = Drain.objects.filter(pk=1, active=True).update(active=False)
        if was_active:
            audit_record(action="portal.undrain", actor=actor)
    return drain_remember(_from_database())
