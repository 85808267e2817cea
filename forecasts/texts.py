"""What a job's page and the form say of a predicted start."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from .model.starts import StartPrediction


def _clock(moment: datetime, now: datetime) -> str:
    local, today = timezone.localtime(moment), timezone.localtime(now)
    if local.date() == today.date():
        return local.strftime("%H:%M")
    return local.strftime("%a %d %b %H:%M")


def start_text(prediction: StartPrediction, now: datetime) -> str:
    """A waiting job's predicted start, as its page says it."""
    days = prediction.horizon.days
    if prediction.latest is None:
        if prediction.within_horizon < 0.1:
            return (f"It may wait more than {days} days: nothing that fits it is likely to "
                    "free up sooner.")  # fmt: skip
        return (f"Likely starts after {_clock(prediction.earliest, now)}, possibly more than "
                f"{days} days from now.")  # fmt: skip
    if prediction.latest <= prediction.made_at + timedelta(minutes=15):
        return "Likely to start within 15 minutes."
    return (f"Likely starts between {_clock(prediction.earliest, now)} and "
            f"{_clock(prediction.latest, now)} (80 % chance); most likely around "
            f"{_clock(prediction.likely, now)}.")  # fmt: skip
