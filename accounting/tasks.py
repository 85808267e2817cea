"""Thin Celery tasks for accounting: they call a service and own their retries."""

from __future__ import annotations

from celery import shared_task

from condor_bridge import BridgeError

from . import monthly, services


@shared_task(acks_late=True, autoretry_for=(BridgeError,), retry_backoff=10, max_retries=3)
def sample_capacity() -> int:
    return services.capacity_sample_pool()


@shared_task(acks_late=True, autoretry_for=(OSError,), retry_backoff=60, max_retries=5)
def send_monthly_reports() -> int:
    return len(monthly.monthly_reports_send())
