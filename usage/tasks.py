"""Thin Celery tasks for usage: they call a service. A sampling that fails is not retried:
the next beat brings the next one."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings

from condor_bridge import BridgeError

from . import services


@shared_task(acks_late=True, expires=60)
def sample_usage() -> tuple[int, int]:
    try:
        return services.usage_sample()
    except BridgeError as exc:
        services.logger.warning("usage sampling skipped: %s", exc)
        return (0, 0)


@shared_task(acks_late=True)
def purge_usage_samples() -> int:
    return services.usage_purge_samples(
        older_than=timedelta(days=settings.USAGE_SAMPLE_RETENTION_DAYS)
    )
