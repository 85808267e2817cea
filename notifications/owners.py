"""What workstation owners hear: a reservation that will take their workstation, and each
Monday what it gave the week before. Found by the scan (notifications.sources.scan); each
occasion has a key, so it is told once."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from forecasts.models import Reservation
from lending.models import WorkstationOwner
from lending.selectors import given_by

from .events import Event
from .services import Occasion

# A reservation is told to the owners of what it holds this long before it begins.
RESERVED_NOTICE = timedelta(hours=24)
# The weekly summary goes out from this hour on Monday (campus time).
WEEKLY_FROM_HOUR = 8


def owner_occasions(now: datetime) -> list[Occasion]:
    return _reservations_ahead(now) + _weekly_summaries(now)


def _owners_by_workstation(names) -> dict[str, list]:
    found: dict[str, list] = {}
    for owner in WorkstationOwner.objects.filter(workstation__in=set(names)).select_related("user"):
        found.setdefault(owner.workstation, []).append(owner.user)
    return found


def _reservations_ahead(now: datetime) -> list[Occasion]:
    ahead = Reservation.objects.filter(
        Q(cancelled_at__isnull=True), starts_at__lte=now + RESERVED_NOTICE, ends_at__gt=now
    ).select_related("lab")
    ahead = list(ahead)
    owners = _owners_by_workstation(name for r in ahead for name in r.workstations)
    occasions = []
    for reservation in ahead:
        starts = timezone.localtime(reservation.starts_at)
        ends = timezone.localtime(reservation.ends_at)
        for name in reservation.workstations:
            for user in owners.get(name, []):
                occasions.append(
                    Occasion(
                        user=user,
                        event=Event.WORKSTATION_RESERVED,
                        key=f"reservation:{reservation.public_id}:owner:{name}",
                        title=f"{name} is reserved from {starts:%a %d %b %H:%M}",
                        body=f"{reservation.lab} holds {name} until {ends:%a %d %b %H:%M}: "
                        "while it lasts, only that lab's jobs start there. Your own terms and "
                        "“I need it back” still hold.",
                        url=reverse("lending:workstation", args=[name]),
                    )
                )
    return occasions


def _weekly_summaries(now: datetime) -> list[Occasion]:
    local = timezone.localtime(now)
    if local.weekday() != 0 or local.hour < WEEKLY_FROM_HOUR:
        return []
    last_monday = (local - timedelta(days=7)).date()
    occasions = []
    owners = WorkstationOwner.objects.select_related("user").order_by("workstation")
    for owner in owners:
        given = given_by(owner.workstation, weeks=2, now=now)
        week = next((w for w in given.weeks if w.week == last_monday.isoformat()), None)
        if week is None or not week.jobs:
            continue  # a week it gave nothing is not worth a letter
        labs = f"{week.labs} lab{'s' if week.labs != 1 else ''}"
        occasions.append(
            Occasion(
                user=owner.user,
                event=Event.WORKSTATION_WEEKLY,
                key=f"workstation:{owner.workstation}:week:{week.week}",
                title=f"{owner.workstation} gave {week.gpu_hours:g} GPU-hours last week",
                body=f"In the week of {week.week}, {owner.workstation} gave {week.gpu_hours:g} "
                f"GPU-hours to {week.jobs} job{'s' if week.jobs != 1 else ''} of {labs}"
                + (
                    ""
                    if week.kwh is None
                    else f", {week.kwh:.3g} kWh of GPU energy above idle"
                    + (" (simulated GPUs)" if given.energy_simulated else "")
                )
                + ". Thank you for lending it.",
                url=reverse("lending:workstation", args=[owner.workstation]),
            )
        )
    return occasions
