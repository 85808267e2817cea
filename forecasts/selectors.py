"""Reading the availability forecasts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from condor_bridge.placement import STAY_FREE_HOURS

from .model.availability import quarter_of_week
from .models import WorkstationForecast
from .services import campus_zone


@dataclass(frozen=True)
class ForecastNow:
    workstation: str
    description: str
    observed_days: float
    # {hours: chance that, free now, it stays free that long}
    stay_free: dict[int, float]
    confidence: str
    fitted_at: datetime

    @property
    def shown(self) -> list[tuple[int, int]]:
        """(hours, percent) for the pool page: a working day and a night."""
        return [(hours, round(100 * self.stay_free[hours])) for hours in (4, 8, 16)
                if hours in self.stay_free]  # fmt: skip


def _now_of(forecast: WorkstationForecast, quarter: int) -> ForecastNow:
    row = forecast.stay_free[quarter] if len(forecast.stay_free) > quarter else []
    return ForecastNow(
        workstation=forecast.workstation, description=forecast.description,
        observed_days=forecast.observed_days,
        stay_free=dict(zip(STAY_FREE_HOURS, row, strict=False)),
        confidence=forecast.confidence[quarter] if forecast.confidence else "low",
        fitted_at=forecast.fitted_at,
    )  # fmt: skip


def forecasts_now(now: datetime | None = None) -> dict[str, ForecastNow]:
    """Every workstation's forecast as it stands at `now`, by name."""
    quarter = quarter_of_week(now or timezone.now(), campus_zone())
    return {f.workstation: _now_of(f, quarter) for f in WorkstationForecast.objects.all()}


def forecast_now(workstation: str, now: datetime | None = None) -> ForecastNow | None:
    forecast = WorkstationForecast.objects.filter(workstation=workstation).first()
    if forecast is None:
        return None
    return _now_of(forecast, quarter_of_week(now or timezone.now(), campus_zone()))
