"""Thin Celery tasks: they take ids, call a service, and own their retries."""

from __future__ import annotations

from celery import shared_task

from . import services, sources


@shared_task(acks_late=True)
def job_changes(changes: list[list]) -> int:
    """The sync's job changes in one batch: [[job pk, "started" | "ended" | "held"], ...]."""
    return sources.job_changes_notify((pk, kind) for pk, kind in changes)


@shared_task(acks_late=True)
def scan() -> int:
    return sources.scan()


@shared_task(acks_late=True)
def purge() -> int:
    return services.notifications_purge()


# Retries wait 30 s, 1, 2, 4 ... minutes (with jitter), up to services.MOST_ATTEMPTS tries.
@shared_task(bind=True, acks_late=True, max_retries=services.MOST_ATTEMPTS)
def deliver(self, delivery_pk: int) -> str:
    outcome = services.delivery_send(delivery_pk)
    if outcome == "retry":
        raise self.retry(countdown=min(30 * 2**self.request.retries, 3600))
    return outcome
