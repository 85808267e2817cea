"""A report's period: its start and end in the portal's time zone, and its label."""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone

# Over this many days the over-time chart counts by week instead of by day.
DAILY_UP_TO_DAYS = 92


@dataclass(frozen=True)
class Period:
    start: datetime
    end: datetime
    label: str

    @property
    def days(self) -> float:
        return (self.end - self.start).total_seconds() / 86400

    @property
    def bucket(self) -> str:
        return "day" if self.days <= DAILY_UP_TO_DAYS else "week"


def _zone() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=_zone())


def period_last_days(days: int, now: datetime | None = None) -> Period:
    now = now or timezone.now()
    return Period(now - timedelta(days=days), now, f"last {days} days")


def period_month(year: int, month: int) -> Period:
    first = date(year, month, 1)
    following = date(year + month // 12, month % 12 + 1, 1)
    return Period(_midnight(first), _midnight(following), f"{calendar.month_name[month]} {year}")


def period_between(first: date, last: date) -> Period:
    """From the start of `first` to the end of `last`, in the portal's time zone."""
    return Period(_midnight(first), _midnight(last + timedelta(days=1)), f"{first} to {last}")
