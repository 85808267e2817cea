"""The execute-node kit's cron job publishes a workstation's reservation window, read from the
real portal at every run: the window on now, or else the next; the last windows read through
an outage; and a lab's name that could break the machine ad, escaped."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from forecasts.kit import kit_credential_create
from forecasts.models import Reservation
from tests.conftest import client_with_token
from tests.factories import LabFactory
from tests.forecasts.test_placement_figures import run_kit as run_cron

RESERVATION_ATTRIBUTES = [
    "NightshiftReservedFor",
    "NightshiftReservedLab",
    "NightshiftReservedFrom",
    "NightshiftReservedUntil",
]


@pytest.fixture
def kit_token(db):
    return kit_credential_create(label="kit", workstations=["ws-volta"])[1]


def hold(lab, *, starts_in: timedelta, hours: float, workstation="ws-volta") -> Reservation:
    start = timezone.now() + starts_in
    return Reservation.objects.create(
        lab=lab,
        purpose="Course",
        starts_at=start,
        ends_at=start + timedelta(hours=hours),
        workstations=[workstation],
        gpus=2,
    )


def run_kit(tmp_path, portal: str, token: str) -> tuple[list[str], str]:
    """The reservation lines the kit's cron job printed, and its stderr."""
    printed, errors = run_cron(
        tmp_path, portal, token, "--reservations-cache", str(tmp_path / "reservations.json")
    )
    return [f"{k} = {v}" for k, v in printed.items() if k.startswith("NightshiftReserved")], errors


def published(lines: list[str]) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in lines)


@pytest.mark.django_db(transaction=True)
def test_the_window_on_now_is_published_before_a_later_one(live_server, kit_token, tmp_path):
    vision = LabFactory(name="Vision", accounting_group="group_vision")
    later = hold(LabFactory(name="NLP"), starts_in=timedelta(hours=5), hours=2)
    now_on = hold(vision, starts_in=-timedelta(minutes=10), hours=2)
    lines, errors = run_kit(tmp_path, live_server.url, kit_token)
    assert published(lines) == {
        "NightshiftReservedFor": '"group_vision"',
        "NightshiftReservedLab": '"Vision"',
        "NightshiftReservedFrom": str(int(now_on.starts_at.timestamp())),
        "NightshiftReservedUntil": str(int(now_on.ends_at.timestamp())),
    }, errors
    now_on.delete()
    lines, _ = run_kit(tmp_path, live_server.url, kit_token)
    assert published(lines)["NightshiftReservedFrom"] == str(int(later.starts_at.timestamp()))


@pytest.mark.django_db(transaction=True)
def test_no_window_publishes_undefined_and_an_outage_keeps_the_last_read(
    live_server, kit_token, tmp_path
):
    hold(LabFactory(name="Vision"), starts_in=-timedelta(minutes=1), hours=1, workstation="ws-x")
    lines, _ = run_kit(tmp_path, live_server.url, kit_token)
    assert published(lines) == dict.fromkeys(RESERVATION_ATTRIBUTES, "undefined")
    hold(LabFactory(name="NLP"), starts_in=-timedelta(minutes=1), hours=1)
    run_kit(tmp_path, live_server.url, kit_token)
    # The portal is gone: what was read last still stands.
    lines, errors = run_kit(tmp_path, "http://127.0.0.1:9", kit_token)
    assert "reservations: could not fetch them" in errors
    assert published(lines)["NightshiftReservedLab"] == '"NLP"'


@pytest.mark.django_db(transaction=True)
def test_a_hostile_lab_name_stays_one_escaped_string(live_server, kit_token, tmp_path):
    hostile = 'Evil" \\\nSTART = True\nNightshiftReservedFor = "x'
    hold(LabFactory(name=hostile), starts_in=-timedelta(minutes=1), hours=1)
    lines, _ = run_kit(tmp_path, live_server.url, kit_token)
    assert len(lines) == 4
    assert published(lines)["NightshiftReservedLab"] == (
        '"Evil\\" \\\\START = TrueNightshiftReservedFor = \\"x"'
    )


@pytest.mark.django_db
def test_students_cannot_read_a_workstations_reservations(student, client):
    url = reverse("api:kit-reservations", kwargs={"workstation": "ws-volta"})
    assert client_with_token(student).get(url).status_code == 403
    assert client.get(url).status_code == 401
