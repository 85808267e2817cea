"""What the regular scan tells: a session near its time limit, a long wait, a reservation
about to begin, a study that stopped; each once, however often the scan runs."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from condor_bridge import JobState as CondorState
from forecasts.models import Reservation, StartPrediction
from jobs import specs, submission, sync
from jobs.models import JobState
from notifications import services, sources
from notifications.models import Notification
from tests.conftest import script_upload
from tests.factories import LabFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def hooked(student, notify_settings, webhook_receiver, fake_bridge):
    services.webhook_set(user=student, url=webhook_receiver.url)
    return webhook_receiver


def waiting_job(user, name="mnist"):
    job = submission.job_submit(user=user, spec=specs.JobSpec(name=name), script=script_upload())
    return submission.job_submit_to_pool(job.pk)


def said_at(moment, now) -> str:
    """How a notice says a time: the clock, and the day too when it is not the day of `now`
    (a test run late in the evening crosses midnight)."""
    local, today = timezone.localtime(moment), timezone.localtime(now)
    return f"{local:%H:%M}" if local.date() == today.date() else f"{local:%a %d %b %H:%M}"


def told(user):
    return list(Notification.objects.filter(user=user).values_list("event", "title", "body"))


def test_a_session_ten_minutes_from_its_limit_is_told_once(
    student, hooked, fake_bridge, django_capture_on_commit_callbacks
):
    job = waiting_job(student, "notebook")
    job.request = {**job.request, "live_services": ["notebook"], "session_limit_s": 3600}
    job.save(update_fields=["request"])
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING)
    with django_capture_on_commit_callbacks(execute=True):
        sync.jobs_sync()
    job.refresh_from_db()
    started = job.started_at
    Notification.objects.all().delete()
    assert sources.scan(now=started + timedelta(minutes=45)) == 0
    with django_capture_on_commit_callbacks(execute=True):
        assert sources.scan(now=started + timedelta(minutes=52)) == 1
        assert sources.scan(now=started + timedelta(minutes=55)) == 0
    [(event, title, body)] = told(student)
    assert event == "session.ending"
    ends = started + timedelta(hours=1)
    told_at = started + timedelta(minutes=52)
    assert title == f"Your notebook session ends at {said_at(ends, told_at)}"
    assert "Save your work" in body
    # The session's start was told before; its end, once.
    assert [json.loads(m.body)["type"] for m in hooked.received] == [
        "session.ready",
        "session.ending",
    ]


def test_a_long_wait_says_when_the_job_is_likely_to_start(student, hooked, fake_bridge):
    job = waiting_job(student)
    now = timezone.now()
    StartPrediction.objects.create(
        job=job,
        first=False,
        made_at=now,
        earliest=now + timedelta(hours=2),
        likely=now + timedelta(hours=3),
        latest=None,
        horizon_s=86400,
        within_horizon=0.5,
    )
    assert job.state == JobState.IDLE or job.state == JobState.QUEUED
    job.state = JobState.IDLE
    job.save(update_fields=["state"])
    assert sources.scan(now=now) == 1
    assert sources.scan(now=now + timedelta(minutes=1)) == 0
    [(event, title, body)] = told(student)
    assert (event, title) == ("job.long_wait", "“mnist” will wait")
    assert f"likely to be free before {said_at(now + timedelta(hours=2), now)};" in body


def test_a_short_wait_is_not_worth_a_word(student, hooked, fake_bridge):
    job = waiting_job(student)
    job.state = JobState.IDLE
    job.save(update_fields=["state"])
    now = timezone.now()
    StartPrediction.objects.create(
        job=job,
        first=False,
        made_at=now,
        earliest=now + timedelta(minutes=5),
        likely=now + timedelta(minutes=20),
        horizon_s=86400,
        within_horizon=1.0,
    )
    assert sources.scan(now=now) == 0


def test_a_reservation_is_told_to_whoever_made_it_ten_minutes_before(student, hooked, fake_bridge):
    now = timezone.now()
    reservation = Reservation.objects.create(
        lab=LabFactory(name="Vision"),
        created_by=student,
        purpose="Course demo",
        starts_at=now + timedelta(minutes=30),
        ends_at=now + timedelta(hours=3),
        workstations=["ws-volta", "ws-fermi"],
        gpus=3,
    )
    assert sources.scan(now=now) == 0
    assert sources.scan(now=now + timedelta(minutes=21)) == 1
    assert sources.scan(now=now + timedelta(minutes=40)) == 0
    [(event, title, body)] = told(student)
    told_at = now + timedelta(minutes=21)
    assert (
        title
        == f"Your reservation “Course demo” begins at {said_at(reservation.starts_at, told_at)}"
    )
    assert body.startswith("ws-volta, ws-fermi held for Vision")


def test_a_cancelled_reservation_is_not_told(student, hooked, fake_bridge):
    now = timezone.now()
    Reservation.objects.create(
        lab=LabFactory(),
        created_by=student,
        purpose="Demo",
        starts_at=now,
        ends_at=now + timedelta(hours=1),
        workstations=["ws-volta"],
        gpus=1,
        cancelled_at=now,
    )
    assert sources.scan(now=now) == 0


def test_what_was_told_long_ago_is_forgotten(student, hooked, fake_bridge):
    services.notify([services.Occasion(user=student, event="job.ended", key="old", title="old")])
    services.notify([services.Occasion(user=student, event="job.ended", key="new", title="new")])
    Notification.objects.filter(key="old").update(created_at=timezone.now() - timedelta(days=91))
    assert services.notifications_purge() == 2  # the notification and its delivery
    assert list(Notification.objects.values_list("key", flat=True)) == ["new"]
