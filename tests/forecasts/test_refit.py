"""Each night's refit: the pool's capacity samples become each workstation's forecast, read
back by quarter hour of the week and shown on the pool page."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from django.urls import reverse

from accounting.models import CapacitySample
from forecasts.model.availability import FREE, TAKEN, UNKNOWN
from forecasts.models import WorkstationForecast
from forecasts.selectors import forecast_now, forecasts_now
from forecasts.services import forecasts_refit, histories_from_capacity
from jobs.models import Workstation

pytestmark = pytest.mark.django_db

ZONE = ZoneInfo("Europe/Berlin")
# Three weeks of samples, every 15 minutes, up to Monday 2 November 2026 00:00 local.
END = datetime(2026, 11, 2, tzinfo=ZONE).astimezone(UTC)
START = END - timedelta(days=21)


@pytest.fixture(autouse=True)
def campus_time(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    settings.FORECAST_HISTORY_DAYS = 21


def samples(workstation: str, *, owner_at_desk) -> None:
    rows = []
    moment = START
    while moment < END:
        taken = owner_at_desk(moment.astimezone(ZONE))
        rows.append(
            CapacitySample(
                taken_at=moment,
                seconds=900,
                workstation=workstation,
                total_gpus=1,
                idle_gpus=0 if taken else 1,
                unavailable_gpus=1 if taken else 0,
            )
        )
        moment += timedelta(minutes=15)
    CapacitySample.objects.bulk_create(rows)


def office_hours(local: datetime) -> bool:
    return local.weekday() < 5 and 9 <= local.hour < 17


@pytest.fixture
def campus():
    samples("ws-desk", owner_at_desk=office_hours)
    samples("ws-lab", owner_at_desk=lambda local: False)
    Workstation.objects.create(name="ws-new", last_seen_at=END, total_gpus=1)


def local(day: int, hour: int) -> datetime:
    """Day 1 is Monday 2 November."""
    return datetime(2026, 11, 1 + day, hour, tzinfo=ZONE)


def test_samples_become_slots_taken_where_the_gpus_were_unavailable(campus):
    histories = histories_from_capacity(start=START, end=END)
    desk = histories["ws-desk"].states
    assert set(desk.tolist()) == {FREE, TAKEN}
    assert (histories["ws-lab"].states == FREE).all()
    assert (histories["ws-new"].states == UNKNOWN).all()


def test_the_refit_stores_a_forecast_for_every_workstation_it_knows(campus):
    assert forecasts_refit(now=END) == 3
    assert set(WorkstationForecast.objects.values_list("workstation", flat=True)) == {
        "ws-desk",
        "ws-lab",
        "ws-new",
    }
    desk = forecast_now("ws-desk", now=local(2, 18))  # Tuesday 18:00
    assert desk.stay_free[8] > 0.8 and desk.confidence == "high"
    assert forecast_now("ws-desk", now=local(2, 8)).stay_free[4] < 0.2  # back at 09:00
    assert desk.description.startswith("Usually free 17:00-09:00 on weekdays and all weekend")
    new = forecast_now("ws-new", now=local(2, 18))
    assert new.confidence == "low"
    assert new.description.startswith("Too new to say")


def test_a_second_refit_replaces_the_first(campus):
    forecasts_refit(now=END)
    forecasts_refit(now=END + timedelta(days=1))
    assert WorkstationForecast.objects.count() == 3
    assert all(f.fitted_at == END + timedelta(days=1) for f in WorkstationForecast.objects.all())


def test_the_management_command_refits_now(campus, capsys, settings):
    settings.FORECAST_HISTORY_DAYS = 90  # the samples end a month before today
    call_command("forecasts_refit")
    assert "learnt for 3 workstations" in capsys.readouterr().out
    assert len(forecasts_now()) == 3


def test_the_pool_page_says_when_each_workstation_is_usually_free(
    student_client, fake_bridge, campus
):
    body = student_client.get(reverse("pool")).content.decode()
    assert "No forecast yet" in body
    forecasts_refit(now=END)
    samples("ws-ampere", owner_at_desk=office_hours)
    forecasts_refit(now=END)
    body = student_client.get(reverse("pool")).content.decode()
    row = body.split('data-workstation="ws-ampere"')[1].split("</tr>")[0]
    assert "Usually free 17:00-09:00 on weekdays" in row
    assert "If free now, stays free for" in row
