"""The reservations of the coming days as a picture: a row per workstation, a bar per window,
drawn as SVG on the server (the pages' CSP allows no inline style, and SVG's geometry is
attributes)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from .reservations import held_text, reservations_live, workstations_to_reserve

DAYS = 14
WIDTH = 1000
LABELS = 130  # the workstations' names, left of the chart
ROW = 26
AXIS = 22  # the days' names, above the rows


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    title: str
    ours: bool


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Row:
    name: str
    y: float


@dataclass(frozen=True)
class Timeline:
    rows: list[Row]
    bars: list[Bar]
    ticks: list[Tick]
    height: float
    days: int
    summary: str
    width: int = WIDTH
    labels: int = LABELS
    row: int = ROW
    axis: int = AXIS


def reservations_timeline(*, lab=None, now: datetime | None = None, days: int = DAYS) -> Timeline:
    """The next `days` days of reservations on every workstation that can be reserved (and
    any other a reservation holds); `lab`'s own windows are marked as ours."""
    now = now or timezone.now()
    end = now + timedelta(days=days)
    span = (end - now).total_seconds()
    chart = WIDTH - LABELS

    def x_of(moment: datetime) -> float:
        return round(LABELS + chart * (moment - now).total_seconds() / span, 1)

    live = list(reservations_live(now).filter(starts_at__lt=end).order_by("starts_at"))
    names = sorted(set(workstations_to_reserve()) | {n for r in live for n in r.workstations})
    rows = [Row(name, AXIS + index * ROW) for index, name in enumerate(names)]
    y_of = {row.name: row.y for row in rows}
    bars = []
    for reservation in live:
        begins, ends = max(reservation.starts_at, now), min(reservation.ends_at, end)
        for name in reservation.workstations:
            bars.append(
                Bar(
                    x=x_of(begins),
                    y=y_of[name] + 4,
                    width=max(2.0, x_of(ends) - x_of(begins)),
                    title=f"{name}, {reservation.purpose}: {held_text(reservation)}",
                    ours=lab is not None and reservation.lab_id == lab.pk,
                )
            )
    ticks = []
    # Aware arithmetic keeps the wall clock: each step is the next local midnight, across a
    # clock change too.
    day = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    while (day := day + timedelta(days=1)) < end:
        ticks.append(Tick(x_of(day), f"{day:%a} {day.day}"))
    held = len({name for reservation in live for name in reservation.workstations})
    summary = (
        f"{len(live)} reservation{'s' if len(live) != 1 else ''} on {held} "
        f"workstation{'s' if held != 1 else ''} in the next {days} days"
        if live
        else f"Nothing is reserved in the next {days} days"
    )
    return Timeline(
        rows=rows,
        bars=bars,
        ticks=ticks,
        height=AXIS + ROW * max(1, len(rows)),
        days=days,
        summary=summary,
    )
