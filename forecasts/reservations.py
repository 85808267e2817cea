"""Reservations: a lab lead holds whole workstations for a window (a course deadline, a demo).

The portal decides which workstations and checks conflicts and the lab's quota; HTCondor
enforces the hold. Each held workstation's execute-node kit reads its windows from the portal
(GET /api/v1/pool/reservations/<workstation>/, through the same startd cron as the placement
figures) and publishes the current or next one in its machine ad; the kit's START expression
then refuses other labs' jobs inside the window, and its RANK puts the lab's own first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from audit.services import audit_record
from condor_bridge.placement import STAY_FREE_HOURS
from jobs.models import Workstation
from labs.models import Lab
from labs.selectors import labs_managed_by
from plumbing.panels import Panel

from .model.availability import quarter_of_week
from .models import Reservation, WorkstationForecast
from .services import campus_zone

# The kits read windows this far ahead; a window further off is published once it nears.
KIT_AHEAD = timedelta(days=14)
# A workstation not reported for this long is not offered for a new reservation.
SEEN_WITHIN = timedelta(days=7)
# Creation takes this transaction-scoped PostgreSQL lock, so that two leads reserving at
# once cannot both be told a workstation is free.
LOCK_KEY = 0x4E535256  # "NSRV"


class ReservationError(ValueError):
    """A reservation that cannot be made, with what to change; `field` names the form field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ReservationRequest:
    """What a lead asks for: `gpus` GPUs, or the named `workstations`, from `starts_at`
    to `ends_at`."""

    lab: Lab
    purpose: str
    starts_at: datetime
    ends_at: datetime
    gpus: int | None = None
    workstations: tuple[str, ...] = ()


def reservation_create(*, actor, asked: ReservationRequest) -> Reservation:
    """Hold workstations for `asked.lab`; refused with a ReservationError that says why."""
    lab = asked.lab
    if not labs_managed_by(actor).filter(pk=lab.pk).exists():
        raise ReservationError(
            "lab", f"Only a lead of {lab.name} or an administrator reserves for it."
        )
    _check_window(asked)
    purpose = asked.purpose.strip()
    if not purpose:
        raise ReservationError("purpose", "Say what the reservation is for (a course, a demo).")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])
        taken = _held_during(asked.starts_at, asked.ends_at)
        known = workstations_to_reserve()
        if asked.workstations:
            chosen = _named(asked.workstations, known, taken)
        else:
            chosen = _chosen_for(asked, known, taken)
        gpus = sum(known[name] for name in chosen)
        _check_quota(lab, asked, gpus)
        reservation = Reservation.objects.create(
            lab=lab,
            created_by=actor,
            purpose=purpose[:200],
            starts_at=asked.starts_at,
            ends_at=asked.ends_at,
            gpus_asked=asked.gpus,
            workstations=sorted(chosen),
            gpus=gpus,
        )
        audit_record(
            action="reservation.create",
            actor=actor,
            target=reservation,
            detail=f"{lab.name}: {', '.join(reservation.workstations)} ({gpus} GPUs) from "
            f"{asked.starts_at.astimezone(UTC):%Y-%m-%d %H:%M} to "
            f"{asked.ends_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC",
        )
    return reservation


def reservation_cancel(*, actor, reservation: Reservation) -> Reservation:
    """End a reservation now (or before it starts); the kits release the workstations at
    their next reading."""
    if not labs_managed_by(actor).filter(pk=reservation.lab_id).exists():
        raise ReservationError("lab", "Only a lead of its lab or an administrator cancels it.")
    now = timezone.now()
    if reservation.state_at(now) in ("cancelled", "ended"):
        raise ReservationError("reservation", "That reservation has already ended.")
    with transaction.atomic():
        reservation.cancelled_at, reservation.cancelled_by = now, actor
        reservation.save(update_fields=["cancelled_at", "cancelled_by"])
        held = ", ".join(reservation.workstations)
        audit_record(
            action="reservation.cancel",
            actor=actor,
            target=reservation,
            detail=f"{reservation.lab.name}: {held}",
        )
    return reservation


def reservations_live(now: datetime | None = None) -> QuerySet[Reservation]:
    """Reservations not cancelled that have not ended, soonest first."""
    now = now or timezone.now()
    return Reservation.objects.filter(cancelled_at=None, ends_at__gt=now).select_related("lab")


def reservations_of_lab(lab: Lab) -> QuerySet[Reservation]:
    """A lab's reservations, the ones still to come or on first, then the last month's."""
    since = timezone.now() - timedelta(days=30)
    return (
        lab.reservations.filter(ends_at__gt=since).select_related("created_by").order_by("-ends_at")
    )


def reservations_for_kit(workstation: str, now: datetime | None = None) -> list[Reservation]:
    """The windows one workstation's kit must know: on now or starting within KIT_AHEAD."""
    now = now or timezone.now()
    return list(
        reservations_live(now).filter(
            workstations__contains=[workstation], starts_at__lt=now + KIT_AHEAD
        )
    )


def reservations_by_workstation(now: datetime | None = None) -> dict[str, Reservation]:
    """For the pool page: each workstation's reservation on now, or else its next one."""
    soon = reservations_live(now).filter(starts_at__lt=(now or timezone.now()) + KIT_AHEAD)
    return _first_by_workstation(soon)


def _check_window(asked: ReservationRequest) -> None:
    now = timezone.now()
    if asked.ends_at <= asked.starts_at:
        raise ReservationError("ends_at", "The end must come after the start.")
    if asked.ends_at <= now:
        raise ReservationError("ends_at", "That window is over already.")
    if asked.starts_at < now - timedelta(minutes=5):
        raise ReservationError("starts_at", "A reservation cannot start in the past.")
    longest = settings.RESERVATION_MAX_HOURS
    if asked.ends_at - asked.starts_at > timedelta(hours=longest):
        raise ReservationError("ends_at", f"A reservation lasts at most {longest} hours.")
    ahead = settings.RESERVATION_AHEAD_DAYS
    if asked.starts_at > now + timedelta(days=ahead):
        raise ReservationError("starts_at", f"Reservations start within the next {ahead} days.")
    if (asked.gpus is None) == (not asked.workstations):
        raise ReservationError("gpus", "Ask for a number of GPUs, or name the workstations.")
    if asked.gpus is not None and asked.gpus < 1:
        raise ReservationError("gpus", "Reserve at least one GPU.")


def _held_during(starts_at: datetime, ends_at: datetime) -> dict[str, Reservation]:
    """The workstations other reservations hold at some moment of the window."""
    overlapping = Reservation.objects.filter(
        cancelled_at=None, starts_at__lt=ends_at, ends_at__gt=starts_at
    ).select_related("lab")
    return _first_by_workstation(overlapping)


def _first_by_workstation(found) -> dict[str, Reservation]:
    """Each workstation the reservations hold, with the first of them (in their order)."""
    by_name: dict[str, Reservation] = {}
    for reservation in found:
        for name in reservation.workstations:
            by_name.setdefault(name, reservation)
    return by_name


def workstations_to_reserve() -> dict[str, int]:
    """Workstations with GPUs the pool has reported lately: name -> GPUs."""
    recent = timezone.now() - SEEN_WITHIN
    rows = Workstation.objects.filter(total_gpus__gt=0, last_seen_at__gte=recent)
    return dict(rows.values_list("name", "total_gpus"))


def _named(
    names: tuple[str, ...], known: dict[str, int], taken: dict[str, Reservation]
) -> list[str]:
    chosen = sorted(set(names))
    for name in chosen:
        if name not in known:
            raise ReservationError(
                "workstations",
                f"No workstation with GPUs called {name!r} has been in the pool this week.",
            )
        if name in taken:
            raise ReservationError(
                "workstations", f"{name} is taken then: {held_text(taken[name])}."
            )
    return chosen


def _chosen_for(
    asked: ReservationRequest, known: dict[str, int], taken: dict[str, Reservation]
) -> list[str]:
    """Enough whole workstations for the GPUs asked: those most likely to stay free of their
    owners through the window first, then as few spare GPUs as possible."""
    free = {name: gpus for name, gpus in known.items() if name not in taken}
    needed = asked.gpus or 0
    if sum(free.values()) < needed:
        detail = f"; {len(taken)} workstations are reserved then" if taken else ""
        raise ReservationError(
            "gpus", f"Only {sum(free.values())} GPUs are free to reserve in that window{detail}."
        )
    chance = _chance_of_staying_free(free, asked.starts_at, asked.ends_at)
    order = sorted(free, key=lambda name: (-chance.get(name, 0.5), free[name], name))
    chosen: list[str] = []
    for name in order:
        if sum(free[n] for n in chosen) >= needed:
            break
        chosen.append(name)
    # Give back what the total does not need: a later, smaller pick may cover the request.
    for name in sorted(chosen, key=lambda n: (free[n], n), reverse=True):
        if sum(free[n] for n in chosen if n != name) >= needed:
            chosen.remove(name)
    return chosen


def _chance_of_staying_free(names, starts_at: datetime, ends_at: datetime) -> dict[str, float]:
    """Each workstation's learnt chance, free at the window's start, of staying free for the
    window (the nearest published duration that covers it, else the longest)."""
    hours = (ends_at - starts_at).total_seconds() / 3600
    column = next(
        (i for i, h in enumerate(STAY_FREE_HOURS) if h >= hours), len(STAY_FREE_HOURS) - 1
    )
    quarter = quarter_of_week(starts_at, campus_zone())
    chances = {}
    for forecast in WorkstationForecast.objects.filter(workstation__in=list(names)):
        try:
            chances[forecast.workstation] = float(forecast.stay_free[quarter][column])
        except (IndexError, TypeError, ValueError):
            continue
    return chances


def _check_quota(lab: Lab, asked: ReservationRequest, gpus: int) -> None:
    if lab.max_concurrent_gpus is not None and gpus > lab.max_concurrent_gpus:
        raise ReservationError(
            "gpus",
            f"{lab.name} may use {lab.max_concurrent_gpus} GPUs at once; these "
            f"workstations have {gpus}.",
        )
    if lab.gpu_hours is None:
        return
    period = timedelta(days=lab.gpu_hours_period_days)
    hours = gpus * (asked.ends_at - asked.starts_at).total_seconds() / 3600
    nearby = lab.reservations.filter(
        cancelled_at=None,
        starts_at__lt=asked.ends_at + period,
        ends_at__gt=asked.starts_at - period,
    )
    booked = sum(reservation.gpu_hours for reservation in nearby)
    if hours + booked > lab.gpu_hours:
        already = f" ({booked:.0f} are reserved already)" if booked else ""
        raise ReservationError(
            "ends_at",
            f"That holds {hours:.0f} GPU-hours; {lab.name}'s quota is "
            f"{lab.gpu_hours:g} GPU-hours per {lab.gpu_hours_period_days} days{already}.",
        )


def window_text(reservation: Reservation) -> str:
    """ "from Fri 04 Dec 09:00 to Fri 04 Dec 17:00", in campus time."""
    start, end = timezone.localtime(reservation.starts_at), timezone.localtime(reservation.ends_at)
    return f"from {start:%a %d %b %H:%M} to {end:%a %d %b %H:%M}"


def held_text(reservation: Reservation) -> str:
    """ "reserved for Vision from Fri 04 Dec 09:00 to Fri 04 Dec 17:00"."""
    return f"reserved for {reservation.lab.name} {window_text(reservation)}"


STATE_LABELS = {"upcoming": "upcoming", "on": "on now", "ended": "ended", "cancelled": "cancelled"}


def lab_reservations_panel(*, lab: Lab) -> Panel:
    """The lab page's section: its reservations, and the way to make one."""
    now = timezone.now()
    rows = []
    for reservation in reservations_of_lab(lab):
        state = reservation.state_at(now)
        rows.append(
            {"reservation": reservation, "state": state, "state_label": STATE_LABELS[state]}
        )
    return Panel("forecasts/_lab_reservations.html", {"lab": lab, "reservations": rows})
