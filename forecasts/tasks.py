"""Thin Celery tasks for the forecasts. A refit that fails is not retried: the next night's
brings the forecasts up to date."""

from __future__ import annotations

from celery import shared_task

from condor_bridge import BridgeError

from . import predictions, services


@shared_task(acks_late=True)
def refit_forecasts() -> int:
    return services.forecasts_refit()


@shared_task(acks_late=True, expires=60)
def predict_starts() -> int:
    try:
        return predictions.starts_predict()
    except BridgeError as exc:
        predictions.logger.warning("start predictions skipped: %s", exc)
        return 0
