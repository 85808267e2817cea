"""What workstation owners hear from the regular scan: a reservation that will take their
workstation (a day ahead), and on Monday morning what it gave the week before, by e-mail
unless they choose otherwise; each once, and nothing to anyone else."""

from datetime import datetime, timedelta

import pytest
from django.core import mail
from django.utils import timezone

from accounting.models import UsageRecord
from forecasts.models import Reservation
from jobs.models import Job, JobState
from lending.models import WorkstationOwner
from notifications import services, sources
from notifications.models import Notification
from tests.factories import LabFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def prof(notify_settings, webhook_receiver, fake_bridge):
    """An owner who gave an e-mail address and set up a webhook (tasks run here)."""
    user = UserFactory(username="prof", email="prof@example.org")
    WorkstationOwner.objects.create(workstation="ws-volta", user=user)
    services.webhook_set(user=user, url=webhook_receiver.url)
    return user


def test_the_owners_of_a_reserved_workstation_hear_of_it_a_day_ahead_once(prof):
    stranger = UserFactory(username="stranger")
    WorkstationOwner.objects.create(workstation="ws-ampere", user=stranger)
    now = timezone.now()
    Reservation.objects.create(
        lab=LabFactory(name="Vision"),
        purpose="Course",
        starts_at=now + timedelta(hours=30),
        ends_at=now + timedelta(hours=33),
        workstations=["ws-volta"],
        gpus=2,
    )
    assert sources.scan(now=now) == 0  # more than a day ahead
    assert sources.scan(now=now + timedelta(hours=7)) == 1
    assert sources.scan(now=now + timedelta(hours=8)) == 0
    [told] = Notification.objects.all()
    assert told.user == prof and told.event == "workstation.reserved"
    assert told.title.startswith("ws-volta is reserved from")
    assert "Vision holds ws-volta" in told.body


def monday_morning() -> datetime:
    today = timezone.localtime().date()
    monday = today - timedelta(days=today.weekday())
    return timezone.make_aware(datetime.combine(monday, datetime.min.time())) + timedelta(hours=9)


def test_on_monday_the_owner_is_told_by_email_what_their_workstation_gave(
    prof, django_capture_on_commit_callbacks
):
    now = monday_morning()
    vision = LabFactory(name="Vision")
    student = UserFactory()
    job = Job.objects.create(owner=student, lab=vision, name="j", state=JobState.COMPLETED)
    started = now - timedelta(days=4)
    UsageRecord.objects.create(
        job=job,
        user=student,
        lab=vision,
        started_at=started,
        ended_at=started + timedelta(hours=3),
        workstation="ws-volta",
        gpus=2,
        wall_s=3 * 3600,
    )
    assert sources.scan(now=now - timedelta(hours=2)) == 0  # not before 08:00
    with django_capture_on_commit_callbacks(execute=True):
        assert sources.scan(now=now) == 1
    assert sources.scan(now=now + timedelta(hours=1)) == 0
    [told] = Notification.objects.all()
    assert told.title == "ws-volta gave 6 GPU-hours last week"
    assert "to 1 job of 1 lab" in told.body
    # By e-mail only, unless the owner chooses otherwise.
    assert [message.to for message in mail.outbox] == [["prof@example.org"]]
    assert [d.channel for d in told.deliveries.all()] == ["email"]


def test_a_week_it_gave_nothing_is_not_worth_a_letter(prof):
    assert sources.scan(now=monday_morning()) == 0
