"""Reservations: a lab lead holds whole workstations for a window. The portal picks them (the
likeliest to stay free first), refuses conflicts and what the lab's quota cannot cover, says
why, and audits each one; the kits read the windows through the API."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEntry
from forecasts.model.availability import QUARTERS_PER_WEEK
from forecasts.models import Reservation, WorkstationForecast
from forecasts.reservations import (
    ReservationError,
    ReservationRequest,
    reservation_cancel,
    reservation_create,
    reservations_for_kit,
)
from jobs.models import Workstation
from tests.conftest import client_with_token
from tests.factories import LabFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


@pytest.fixture
def pool(db):
    """Four GPU workstations seen today, and a desktop with none."""
    now = timezone.now()
    for name, gpus in (
        ("ws-ampere", 4),
        ("ws-volta", 2),
        ("ws-fermi", 1),
        ("ws-turing", 2),
        ("ws-office", 0),
    ):
        Workstation.objects.create(name=name, last_seen_at=now, total_gpus=gpus)


@pytest.fixture
def vision(db):
    return LabFactory(name="Vision")


@pytest.fixture
def lead(vision):
    return MembershipFactory(lab=vision, role="lead").user


def likely_free(name: str, chance: float) -> None:
    WorkstationForecast.objects.create(
        workstation=name,
        fitted_at=timezone.now(),
        observed_days=21,
        stay_free=[[chance] * 5] * QUARTERS_PER_WEEK,
        confidence=["high"] * QUARTERS_PER_WEEK,
    )


def ask(lab, *, gpus=None, workstations=(), start_in=HOUR, hours=4, purpose="Course deadline"):
    starts_at = timezone.now() + start_in
    return ReservationRequest(
        lab=lab,
        purpose=purpose,
        starts_at=starts_at,
        ends_at=starts_at + timedelta(hours=hours),
        gpus=gpus,
        workstations=tuple(workstations),
    )


def refusal(actor, asked) -> ReservationError:
    with pytest.raises(ReservationError) as caught:
        reservation_create(actor=actor, asked=asked)
    return caught.value


def test_gpus_asked_are_held_on_the_workstations_likeliest_to_stay_free(pool, vision, lead):
    likely_free("ws-volta", 0.95)
    likely_free("ws-turing", 0.9)
    likely_free("ws-ampere", 0.2)
    made = reservation_create(actor=lead, asked=ask(vision, gpus=3))
    assert made.workstations == ["ws-turing", "ws-volta"]
    assert (made.gpus, made.gpus_asked) == (4, 3)
    entry = AuditEntry.objects.get(action="reservation.create")
    assert entry.actor == lead and "ws-turing, ws-volta (4 GPUs)" in entry.detail


def test_no_more_workstations_are_held_than_the_gpus_need(pool, vision, lead):
    likely_free("ws-fermi", 0.99)
    likely_free("ws-ampere", 0.98)
    # Fermi is likeliest, but Ampere alone covers 4: Fermi's one GPU would be spare.
    made = reservation_create(actor=lead, asked=ask(vision, gpus=4))
    assert made.workstations == ["ws-ampere"]


def test_a_workstation_held_by_another_lab_then_is_refused_with_who_holds_it(pool, vision, lead):
    nlp = LabFactory(name="NLP")
    noor = MembershipFactory(lab=nlp, role="lead").user
    reservation_create(actor=noor, asked=ask(nlp, workstations=["ws-volta"]))
    error = refusal(lead, ask(vision, workstations=["ws-volta"], start_in=3 * HOUR))
    assert error.field == "workstations"
    assert "ws-volta is taken then: reserved for NLP from" in error.message
    # Back to back is no conflict.
    after = reservation_create(
        actor=lead, asked=ask(vision, workstations=["ws-volta"], start_in=5 * HOUR)
    )
    assert after.workstations == ["ws-volta"]
    # Asking for GPUs skips the held workstation.
    picked = reservation_create(actor=lead, asked=ask(vision, gpus=2, start_in=2 * HOUR, hours=1))
    assert "ws-volta" not in picked.workstations


def test_more_gpus_than_are_free_then_are_refused_with_the_count(pool, vision, lead):
    error = refusal(lead, ask(vision, gpus=10))
    assert error.field == "gpus"
    assert error.message == "Only 9 GPUs are free to reserve in that window."


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"hours": -1}, "ends_at", "The end must come after the start."),
        ({"hours": 73}, "ends_at", "A reservation lasts at most 72 hours."),
        ({"start_in": -3 * HOUR, "hours": 1}, "ends_at", "That window is over already."),
        ({"start_in": -HOUR}, "starts_at", "A reservation cannot start in the past."),
        (
            {"start_in": timedelta(days=61)},
            "starts_at",
            "Reservations start within the next 60 days.",
        ),
        ({"gpus": None}, "gpus", "Ask for a number of GPUs, or name the workstations."),
        (
            {"workstations": ["ws-volta"]},
            "gpus",
            "Ask for a number of GPUs, or name the workstations.",
        ),
        ({"gpus": 0}, "gpus", "Reserve at least one GPU."),
        ({"purpose": "   "}, "purpose", "Say what the reservation is for (a course, a demo)."),
    ],
)
def test_a_bad_window_or_request_is_refused_with_what_to_change(
    pool, vision, lead, change, field, message
):
    asked = ask(vision, **{"gpus": 1, **change})
    error = refusal(lead, asked)
    assert (error.field, error.message) == (field, message)
    assert not Reservation.objects.exists()


def test_an_unknown_or_gpuless_workstation_is_refused(pool, vision, lead):
    for name in ("ws-office", "ws-nowhere", "'; DROP TABLE jobs_job; --"):
        error = refusal(lead, ask(vision, workstations=[name]))
        assert error.message == (
            f"No workstation with GPUs called {name!r} has been in the pool this week."
        )


def test_the_labs_quota_bounds_what_it_may_hold(pool, vision, lead):
    vision.max_concurrent_gpus = 3
    vision.save()
    error = refusal(lead, ask(vision, workstations=["ws-ampere"]))
    assert error.message == "Vision may use 3 GPUs at once; these workstations have 4."
    vision.max_concurrent_gpus, vision.gpu_hours = None, 20
    vision.save()
    reservation_create(actor=lead, asked=ask(vision, workstations=["ws-volta"], hours=8))
    error = refusal(lead, ask(vision, workstations=["ws-turing"], start_in=10 * HOUR, hours=4))
    assert error.message == (
        "That holds 8 GPU-hours; Vision's quota is 20 GPU-hours per 7 days (16 are reserved "
        "already)."
    )


def test_only_the_labs_leads_and_admins_reserve_for_it(pool, vision, lead):
    student = MembershipFactory(lab=vision).user
    other_lead = MembershipFactory(lab=LabFactory(name="NLP"), role="lead").user
    for actor in (student, other_lead):
        assert refusal(actor, ask(vision, gpus=1)).field == "lab"
    admin = UserFactory(username="root", is_staff=True)
    assert reservation_create(actor=admin, asked=ask(vision, gpus=1)).lab == vision


def test_a_cancelled_reservation_is_audited_and_leaves_the_kits_feed(pool, vision, lead):
    made = reservation_create(
        actor=lead, asked=ask(vision, workstations=["ws-volta"], start_in=-timedelta(minutes=1))
    )
    assert reservations_for_kit("ws-volta") == [made]
    assert reservations_for_kit("ws-ampere") == []
    reservation_cancel(actor=lead, reservation=made)
    assert reservations_for_kit("ws-volta") == []
    assert AuditEntry.objects.filter(action="reservation.cancel", actor=lead).exists()
    with pytest.raises(ReservationError, match="already ended"):
        reservation_cancel(actor=lead, reservation=made)


def test_the_kits_feed_holds_windows_on_now_or_in_the_next_two_weeks(pool, vision, lead):
    soon = reservation_create(actor=lead, asked=ask(vision, workstations=["ws-fermi"]))
    reservation_create(
        actor=lead, asked=ask(vision, workstations=["ws-fermi"], start_in=timedelta(days=20))
    )
    assert reservations_for_kit("ws-fermi") == [soon]


# -- The API ---------------------------------------------------------------------------------


def test_a_lead_reserves_through_the_api_and_cancels(pool, vision, lead):
    api = client_with_token(lead)
    start = timezone.now() + HOUR
    answer = api.post(
        reverse("api:reservation-list"),
        {
            "lab": vision.pk,
            "purpose": "Demo day",
            "starts_at": start.isoformat(),
            "ends_at": (start + 2 * HOUR).isoformat(),
            "gpus_asked": 2,
        },
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert (body["lab_name"], body["gpus"], body["state"]) == ("Vision", 2, "upcoming")
    listed = api.get(reverse("api:reservation-list")).json()
    assert [r["id"] for r in listed] == [body["id"]]
    url = reverse("api:reservation-detail", kwargs={"public_id": body["id"]})
    assert api.delete(url).json()["state"] == "cancelled"
    assert api.delete(url).status_code == 400


def test_the_api_says_which_field_to_change(pool, vision, lead):
    start = timezone.now() + HOUR
    answer = client_with_token(lead).post(
        reverse("api:reservation-list"),
        {
            "lab": vision.pk,
            "purpose": "Demo",
            "starts_at": start.isoformat(),
            "ends_at": (start + 2 * HOUR).isoformat(),
            "workstations": ["ws-nowhere"],
        },
        format="json",
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    message = "No workstation with GPUs called 'ws-nowhere' has been in the pool this week."
    assert error == {"code": "invalid", "message": message, "fields": {"workstations": [message]}}


def test_a_student_may_list_but_not_reserve_or_cancel(pool, vision, lead):
    student = MembershipFactory(lab=vision).user
    made = reservation_create(actor=lead, asked=ask(vision, gpus=1))
    api = client_with_token(student)
    assert api.get(reverse("api:reservation-list")).status_code == 200
    start = timezone.now() + HOUR
    answer = api.post(
        reverse("api:reservation-list"),
        {
            "lab": vision.pk,
            "purpose": "Mine",
            "starts_at": start.isoformat(),
            "ends_at": (start + HOUR).isoformat(),
            "gpus_asked": 1,
        },
        format="json",
    )
    assert answer.status_code == 403
    url = reverse("api:reservation-detail", kwargs={"public_id": made.public_id})
    assert api.delete(url).status_code == 403
    assert Reservation.objects.get().cancelled_at is None
