"""Reading the availability forecasts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from condor_bridge.placement import STAY_FREE_HOURS
from jobs.models import JobState
from jobs.services import deadline_of

from .model.availability import quarter_of_week
from .model.checkpoints import figures_for_row
from .models import StartPrediction, WorkstationForecast
from .predictions import shown
from .services import campus_zone
from .texts import deadline_text, start_text


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
        return [
            (hours, round(100 * self.stay_free[hours]))
            for hours in (4, 8, 16)
            if hours in self.stay_free
        ]


def _now_of(forecast: WorkstationForecast, quarter: int) -> ForecastNow:
    row = forecast.stay_free[quarter] if len(forecast.stay_free) > quarter else []
    return ForecastNow(
        workstation=forecast.workstation,
        description=forecast.description,
        observed_days=forecast.observed_days,
        stay_free=dict(zip(STAY_FREE_HOURS, row, strict=False)),
        confidence=forecast.confidence[quarter] if forecast.confidence else "low",
        fitted_at=forecast.fitted_at,
    )


def forecasts_now(now: datetime | None = None) -> dict[str, ForecastNow]:
    """Every workstation's forecast as it stands at `now`, by name."""
    quarter = quarter_of_week(now or timezone.now(), campus_zone())
    return {f.workstation: _now_of(f, quarter) for f in WorkstationForecast.objects.all()}


def forecast_now(workstation: str, now: datetime | None = None) -> ForecastNow | None:
    forecast = WorkstationForecast.objects.filter(workstation=workstation).first()
    if forecast is None:
        return None
    return _now_of(forecast, quarter_of_week(now or timezone.now(), campus_zone()))


# The kit keeps publishing a week's figures through a portal outage, not longer.
FIGURES_VALID_FOR = timedelta(days=8)


def placement_figures(workstation: str) -> dict | None:
    """The week of figures the workstation's kit publishes (PlacementFiguresView)."""
    forecast = WorkstationForecast.objects.filter(workstation=workstation).first()
    if forecast is None or not forecast.stay_free:
        return None
    timing = [figures_for_row(STAY_FREE_HOURS, row) for row in forecast.stay_free]
    return {
        "workstation": forecast.workstation,
        "fitted_at": forecast.fitted_at,
        "valid_until": forecast.fitted_at + FIGURES_VALID_FOR,
        "time_zone": str(campus_zone()),
        "hours": list(STAY_FREE_HOURS),
        "quarter_hours": forecast.stay_free,
        "mean_free_s": [mean for mean, _ in timing],
        "possible_return_s": [possible for _, possible in timing],
    }


def job_start_payload(job, now: datetime | None = None) -> dict:
    """What the job page and the API say of a waiting job's start; `prediction` is None
    when the job does not wait or has not been predicted yet."""
    now = now or timezone.now()
    stored = None
    if job.state == JobState.IDLE:
        stored = StartPrediction.objects.filter(job=job, first=False).first()
    if stored is None:
        return {"waiting": job.state in (JobState.IDLE, JobState.QUEUED), "prediction": None}
    prediction = shown(stored)
    return {
        "waiting": True,
        "prediction": {
            "made_at": prediction.made_at,
            "earliest": prediction.earliest,
            "likely": prediction.likely,
            "latest": prediction.latest,
            "coverage": prediction.coverage,
            "within_horizon": prediction.within_horizon,
            "text": start_text(prediction, now),
            "interruptions": stored.interruptions,
            "deadline": _deadline(job, prediction, now, interruptions_s=stored.interruptions_s),
        },
    }


def _deadline(job, prediction, now: datetime, *, interruptions_s: float) -> str:
    finish_by = deadline_of(job.request)
    if finish_by is None:
        return ""
    runtime_s = (job.request or {}).get("max_runtime_s")
    return deadline_text(
        prediction,
        finish_by=finish_by,
        runtime_s=runtime_s,
        now=now,
        interruptions_s=interruptions_s,
    )
