"""Thin Celery tasks for the forecasts. A refit that fails is not retried: the next night's
brings the forecasts up to date."""

from __future__ import annotations

from celery import shared_task

from . import services


@shared_task(acks_late=True)
def refit_forecasts() -> int:
    return services.forecasts_refit()
