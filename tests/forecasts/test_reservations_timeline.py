"""The reservations of the next two weeks as a picture, on the pool page and the reservation
form: a row per workstation, a bar per window where it falls in the fortnight, the lab's own
marked on its form, a line at each local midnight (across a clock change too)."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from forecasts.models import Reservation
from forecasts.timeline import LABELS, WIDTH, reservations_timeline
from jobs.models import Workstation
from tests.factories import LabFactory, MembershipFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 10, 19, 12, 0, tzinfo=UTC)  # a Monday, a week before Europe's clocks go back
CHART = WIDTH - LABELS


@pytest.fixture
def campus(db):
    for name, gpus in (("ws-volta", 2), ("ws-ampere", 1), ("ws-office", 0)):
        Workstation.objects.create(name=name, last_seen_at=timezone.now(), total_gpus=gpus)


def hold(lab, *, starts_in: timedelta, hours: float, names=("ws-volta",), now=NOW, **fields):
    return Reservation.objects.create(
        lab=lab,
        purpose=fields.pop("purpose", "Course"),
        starts_at=now + starts_in,
        ends_at=now + starts_in + timedelta(hours=hours),
        workstations=list(names),
        gpus=2,
        **fields,
    )


def test_each_window_is_a_bar_where_it_falls_in_the_fortnight(campus):
    vision, nlp = LabFactory(name="Vision"), LabFactory(name="NLP")
    hold(vision, starts_in=timedelta(hours=-2), hours=8.4)  # on now: drawn from now on
    hold(nlp, starts_in=timedelta(days=7), hours=84, names=("ws-ampere",))
    hold(nlp, starts_in=timedelta(days=15), hours=2)  # past the fortnight
    hold(nlp, starts_in=timedelta(hours=1), hours=2, cancelled_at=NOW)
    with override_settings(TIME_ZONE="UTC"):
        timeline = reservations_timeline(lab=vision, now=NOW)
    assert [row.name for row in timeline.rows] == ["ws-ampere", "ws-volta"]  # GPUs only
    on_now, later = sorted(timeline.bars, key=lambda bar: bar.x)
    assert on_now.x == LABELS and on_now.width == pytest.approx(CHART * 6.4 / (14 * 24), abs=0.2)
    assert on_now.ours and not later.ours
    assert later.x == pytest.approx(LABELS + CHART / 2, abs=0.2)
    assert later.title.startswith("ws-ampere, Course: reserved for NLP from Mon 26 Oct 12:00")
    assert timeline.summary == "2 reservations on 2 workstations in the next 14 days"


def test_a_line_marks_each_local_midnight_across_the_clock_change(campus):
    with override_settings(TIME_ZONE="Europe/Berlin"):
        ticks = reservations_timeline(now=NOW).ticks
    berlin = ZoneInfo("Europe/Berlin")
    days = ["Tue 20", "Wed 21", "Thu 22", "Fri 23", "Sat 24", "Sun 25", "Mon 26", "Tue 27"]
    assert [tick.label for tick in ticks[:8]] == days
    span = 14 * 24 * 3600
    for tick in ticks:
        moment = NOW + timedelta(seconds=(tick.x - LABELS) / CHART * span)
        local = moment.astimezone(berlin)
        minutes = local.hour * 60 + local.minute
        assert min(minutes, 24 * 60 - minutes) <= 2, local  # the drawing's 0.1 is 142 s
    # Sunday 25 October has 25 hours: the line after it sits an hour further on.
    sunday, monday = ticks[5], ticks[6]
    assert monday.x - sunday.x == pytest.approx(CHART * 25 / (14 * 24), abs=0.2)


def test_with_nothing_reserved_the_picture_says_so(campus):
    timeline = reservations_timeline(now=NOW)
    assert timeline.bars == []
    assert timeline.summary == "Nothing is reserved in the next 14 days"


def test_the_pool_page_and_the_form_draw_it_and_escape_what_a_lead_typed(campus, client):
    vision = LabFactory(name="Vision")
    lead = MembershipFactory(lab=vision, role="lead").user
    hold(
        vision,
        starts_in=timedelta(hours=1),
        hours=3,
        now=timezone.now(),
        purpose='<script>alert("x")</script>',
    )
    client.force_login(lead)
    pool = client.get(reverse("pool")).content.decode()
    assert 'data-role="reservations-timeline"' in pool
    assert 'aria-label="1 reservation on 1 workstation in the next 14 days"' in pool
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;: reserved for Vision" in pool
    assert "<script>alert" not in pool
    form = client.get(reverse("labs:reservation_new", args=[vision.pk])).content.decode()
    assert 'class="window ours"' in form and "(Vision's in colour)" in form
