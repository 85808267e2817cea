"""Thin Celery tasks for lending: they call a service. A run that fails is not retried: the
next beat looks again at the same two days."""

from __future__ import annotations

from celery import shared_task

from . import services


@shared_task(acks_late=True, expires=300)
def relieve_reclaimed_work() -> int:
    return services.reclaim_relief_apply()
