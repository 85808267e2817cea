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
            return (
                f"It may wait more than {days} days: nothing that fits it is likely to "
                "free up sooner."
            )
        return (
            f"Likely starts after {_clock(prediction.earliest, now)}, possibly more than "
            f"{days} days from now."
        )
    if prediction.latest <= prediction.made_at + timedelta(minutes=15):
        return "Likely to start within 15 minutes."
    return (
        f"Likely starts between {_clock(prediction.earliest, now)} and "
        f"{_clock(prediction.latest, now)} (80 % chance); most likely around "
        f"{_clock(prediction.likely, now)}."
    )


def finish_chance(prediction: StartPrediction, cutoff: datetime) -> tuple[float, bool]:
    """The chance the job starts by `cutoff`, read off the prediction's range (10 % at its
    earliest, 50 % at the likely start, 90 % at its latest, straight lines between), and
    whether that is a bound rather than an estimate (below the earliest, past the latest)."""
    points = [(prediction.earliest, 0.1), (prediction.likely, 0.5)]
    if prediction.latest is not None:
        points.append((prediction.latest, 0.9))
    if cutoff < points[0][0]:
        return 0.1, True
    for (start, low), (end, high) in zip(points, points[1:], strict=False):
        if cutoff < end:
            span = (end - start).total_seconds()
            share = (cutoff - start).total_seconds() / span if span > 0 else 1.0
            return low + (high - low) * share, False
    return points[-1][1], True


def deadline_text(
    prediction: StartPrediction,
    *,
    finish_by: datetime,
    runtime_s: int | None,
    now: datetime,
    interruptions_s: float = 0.0,
) -> str:
    """Whether a job is likely to finish by its deadline, for the form and its page:
    started by the deadline less its maximum runtime and the time owners' expected
    interruptions and its checkpoints would add (`interruptions_s`)."""
    when = _clock(finish_by, now)
    if not runtime_s:
        return f"Give a maximum runtime to know whether it can finish by {when}."
    added = timedelta(seconds=round(interruptions_s / 60) * 60)
    cutoff = finish_by - timedelta(seconds=runtime_s) - added
    if finish_by - timedelta(seconds=runtime_s) < prediction.made_at:
        return f"It cannot finish by {when}: its maximum runtime would end later."
    if cutoff < prediction.made_at:
        return (
            f"It is unlikely to finish by {when}: owners' expected interruptions and "
            f"its checkpoints would add about {_minutes(added)} to its runtime."
        )
    chance, bound = finish_chance(prediction, cutoff)
    percent = round(chance * 100)
    if bound:
        said = (
            f"unlikely (under {percent} %)"
            if chance < 0.5
            else f"very likely (over {percent} %)"
            if chance >= 0.9
            else f"possible (over {percent} %)"
        )
    elif chance >= 0.6:
        said = f"likely (about {percent} %)"
    elif chance >= 0.3:
        said = f"uncertain (about {percent} %)"
    else:
        said = f"unlikely (about {percent} %)"
    if added >= timedelta(minutes=1):
        return (
            f"Finishing by {when} is {said}: it must start by {_clock(cutoff, now)}, leaving "
            f"its maximum runtime and about {_minutes(added)} for owners' interruptions "
            "and its checkpoints."
        )
    return (
        f"Finishing by {when} is {said}: it must start by {_clock(cutoff, now)}, and "
        "owners' interruptions would add to its runtime."
    )


def _minutes(span: timedelta) -> str:
    minutes = round(span.total_seconds() / 60)
    if minutes < 120:
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{minutes / 60:.1f} hours"
