"""Learning each workstation's availability from the pool's capacity samples.

Every night (and on `manage.py forecasts_refit`) the last NIGHTSHIFT_FORECAST_HISTORY_DAYS of
capacity samples become each workstation's history in 15-minute slots: taken where a sample
saw its GPUs unavailable (the owner back, or the machine off), free where samples saw it
offer them, unknown where none was taken. `forecasts.model` learns from those histories; the
answers for every quarter hour of the week are stored, so that reading them costs a lookup.
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
from django.conf import settings
from django.utils import timezone

from accounting.models import CapacitySample
from condor_bridge.placement import STAY_FREE_HOURS
from jobs.models import Workstation

from .authentication import WORKSTATION_NAME as WORKSTATION_NAME
from .authentication import KitEndpoint as KitEndpoint
from .authentication import check_kit_request as check_kit_request
from .authentication import kit_refusals as kit_refusals
from .kit import KitCredentialError as KitCredentialError
from .kit import kit_credential_authenticate as kit_credential_authenticate
from .kit import kit_credential_create as kit_credential_create
from .model.availability import (
    FREE,
    QUARTERS_PER_WEEK,
    SLOT_S,
    TAKEN,
    UNKNOWN,
    History,
    PoolModel,
    quarter_of_week,
)
from .models import WorkstationForecast

logger = logging.getLogger(__name__)


def campus_zone() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def histories_from_capacity(*, start: datetime, end: datetime) -> dict[str, History]:
    """Each workstation's slots from the capacity samples taken in [start, end)."""
    count = max(0, int((end - start).total_seconds() // SLOT_S))
    states: dict[str, np.ndarray] = {}
    for name in Workstation.objects.values_list("name", flat=True):
        states[name] = np.full(count, UNKNOWN, dtype=np.int8)
    samples = CapacitySample.objects.filter(taken_at__gte=start, taken_at__lt=end).values_list(
        "workstation", "taken_at", "seconds", "unavailable_gpus"
    )
    for name, taken_at, seconds, unavailable in samples.iterator(chunk_size=10_000):
        row = states.setdefault(name, np.full(count, UNKNOWN, dtype=np.int8))
        first = int((taken_at - start).total_seconds() // SLOT_S)
        last = min(
            count,
            max(first + 1, math.ceil(((taken_at - start).total_seconds() + seconds) / SLOT_S)),
        )
        if first < 0 or first >= count:
            continue
        if unavailable:
            row[first:last] = TAKEN
        else:
            window = row[first:last]
            window[window == UNKNOWN] = FREE
    return {name: History(start=start, states=row) for name, row in states.items()}


def forecasts_refit(*, now: datetime | None = None) -> int:
    """Learn every workstation's availability again; returns how many were stored."""
    now = now or timezone.now()
    end = datetime.fromtimestamp(int(now.timestamp()) // SLOT_S * SLOT_S, UTC)
    start = end - timedelta(days=settings.FORECAST_HISTORY_DAYS)
    histories = histories_from_capacity(start=start, end=end)
    zone = campus_zone()
    pool = PoolModel.fit(histories, zone=zone)
    # One moment for each quarter hour of the week, from now on.
    moments = [end + timedelta(seconds=SLOT_S * k) for k in range(QUARTERS_PER_WEEK)]
    order = [quarter_of_week(moment, zone) for moment in moments]
    rows = []
    for name, history in histories.items():
        model = pool.model(name)
        table: list[list[float]] = [[] for _ in range(QUARTERS_PER_WEEK)]
        confidence: list[str] = [""] * QUARTERS_PER_WEEK
        for moment, quarter in zip(moments, order, strict=True):
            if table[quarter]:
                continue  # the hour repeated when the clocks go back
            estimates = [model.stay_free(moment, hours) for hours in STAY_FREE_HOURS]
            table[quarter] = [round(e.probability, 3) for e in estimates]
            confidence[quarter] = estimates[-1].confidence
        for quarter in range(QUARTERS_PER_WEEK):  # the hour skipped when they go forward
            if not table[quarter]:
                table[quarter] = table[quarter - 1]
                confidence[quarter] = confidence[quarter - 1]
        rows.append(
            WorkstationForecast(
                workstation=name,
                fitted_at=now,
                observed_days=round(model.observed_days, 2),
                stay_free=table,
                confidence=confidence,
                description=model.describe(history),
                history=history_bytes(history),
                history_start=history.start,
            )
        )
    WorkstationForecast.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["workstation"],
        update_fields=[
            "fitted_at",
            "observed_days",
            "stay_free",
            "confidence",
            "description",
            "history",
            "history_start",
        ],
    )
    logger.info("availability forecasts learnt for %d workstations", len(rows))
    return len(rows)


def history_bytes(history: History) -> bytes:
    return history.states.astype(np.uint8).tobytes()  # UNKNOWN (-1) is kept as 255


def history_of(forecast: WorkstationForecast) -> History:
    states = np.frombuffer(bytes(forecast.history), dtype=np.uint8).astype(np.int8)
    return History(start=forecast.history_start or forecast.fitted_at, states=states)
