"""What the sync's changes tell a job's owner, through the real task path on the fake
bridge: a start, an end, a hold, a sweep that finished; each once."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from condor_bridge import JobState as CondorState
from experiments import sweeps
from jobs import specs, submission, sync
from notifications import services, sources
from notifications.models import Notification
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db


@pytest.fixture
def hooked(student, notify_settings, webhook_receiver, fake_bridge):
    """The student has a webhook; tasks run in place (the fake bridge's eager Celery)."""
    services.webhook_set(user=student, url=webhook_receiver.url)
    return webhook_receiver


def submitted(user, *, notify_by_email=False, request=None):
    job = submission.job_submit(
        user=user,
        spec=specs.JobSpec(name="mnist", notify_by_email=notify_by_email),
        script=script_upload(),
    )
    job = submission.job_submit_to_pool(job.pk)
    if request:
        job.request = {**job.request, **request}
        job.save(update_fields=["request"])
    return job


def synced(fake_bridge, job, state, capture, **fields):
    fake_bridge.set_state(str(job.public_id), state, **fields)
    with capture(execute=True):
        sync.jobs_sync()
    job.refresh_from_db()
    return job


def titles(user) -> list[str]:
    return list(
        Notification.objects.filter(user=user).order_by("id").values_list("title", flat=True)
    )


def test_the_owner_hears_that_the_job_started_and_completed_once_each(
    student, hooked, fake_bridge, django_capture_on_commit_callbacks
):
    job = submitted(student)
    synced(fake_bridge, job, CondorState.RUNNING, django_capture_on_commit_callbacks)
    synced(fake_bridge, job, CondorState.COMPLETED, django_capture_on_commit_callbacks, exit_code=0)
    with django_capture_on_commit_callbacks(execute=True):
        sync.jobs_sync()
    assert titles(student) == ["“mnist” started", "“mnist” completed"]
    assert [m.headers["webhook-id"] for m in hooked.received] == [
        f"msg_{n.public_id.hex}" for n in Notification.objects.order_by("id")
    ]
    # The same change told again (a task run twice) tells nothing new.
    assert sources.job_changes_notify([(job.pk, "ended")]) == 0


def test_a_held_job_tells_why_and_emails_an_owner_who_asked(
    student, hooked, fake_bridge, django_capture_on_commit_callbacks
):
    job = submitted(student, notify_by_email=True)
    synced(
        fake_bridge,
        job,
        CondorState.HELD,
        django_capture_on_commit_callbacks,
        hold_reason="over memory",
        hold_reason_code=34,
        hold_reason_subcode=102,
    )
    [held] = Notification.objects.filter(user=student)
    assert held.title == "“mnist” is held"
    assert "It used more memory than it asked for." in held.body
    assert {d.channel for d in held.deliveries.all()} == {"webhook", "email"}
    assert len(mail.outbox) == 1 and mail.outbox[0].to == [student.email]
    assert "It used more memory than it asked for." in mail.outbox[0].body


def test_no_email_without_opting_in_and_none_for_a_start(
    student, notify_settings, fake_bridge, django_capture_on_commit_callbacks
):
    quiet = submitted(student)
    synced(
        fake_bridge, quiet, CondorState.COMPLETED, django_capture_on_commit_callbacks, exit_code=1
    )
    assert mail.outbox == []
    asked = submitted(student, notify_by_email=True)
    synced(fake_bridge, asked, CondorState.RUNNING, django_capture_on_commit_callbacks)
    assert mail.outbox == []
    synced(
        fake_bridge, asked, CondorState.COMPLETED, django_capture_on_commit_callbacks, exit_code=1
    )
    assert [m.subject for m in mail.outbox] == ["[Nightshift] “mnist” failed"]
    assert "It exited with code 1." in mail.outbox[0].body


def test_a_sweep_is_told_once_when_its_last_run_ends(
    student, hooked, fake_bridge, django_capture_on_commit_callbacks
):
    sweep = sweeps.sweep_submit(
        user=student,
        spec=specs.JobSpec(name="lr", arguments=["--lr", "{lr}"]),
        plan=sweeps.SweepPlan.from_json({"grid": {"lr": [0.1, 0.01, 0.001]}}),
        script=script_upload(),
    )
    sweeps.sweep_submit_to_pool(sweep.pk)
    first, second, third = sweep.runs.order_by("sweep_index")
    synced(fake_bridge, first, CondorState.RUNNING, django_capture_on_commit_callbacks)
    synced(
        fake_bridge, first, CondorState.COMPLETED, django_capture_on_commit_callbacks, exit_code=0
    )
    synced(
        fake_bridge, second, CondorState.COMPLETED, django_capture_on_commit_callbacks, exit_code=1
    )
    assert titles(student) == []
    synced(
        fake_bridge, third, CondorState.COMPLETED, django_capture_on_commit_callbacks, exit_code=0
    )
    [done] = Notification.objects.filter(user=student)
    assert done.title == "Sweep “lr” finished"
    assert done.body == "3 runs: 2 completed, 1 failed."
    assert done.url == f"/jobs/sweeps/{sweep.public_id}/"


def test_a_notebook_session_says_it_is_running(
    student, hooked, fake_bridge, django_capture_on_commit_callbacks
):
    job = submitted(student, request={"live_services": ["notebook"], "session_limit_s": 3600})
    synced(fake_bridge, job, CondorState.RUNNING, django_capture_on_commit_callbacks)
    [ready] = Notification.objects.filter(user=student)
    assert (ready.event, ready.title) == ("session.ready", "Your notebook session is running")


def test_a_student_who_turned_an_event_off_is_not_told(
    student, hooked, fake_bridge, django_capture_on_commit_callbacks
):
    services.preferences_set(user=student, chosen={"job.started": set()})
    job = submitted(student)
    synced(fake_bridge, job, CondorState.RUNNING, django_capture_on_commit_callbacks)
    assert titles(student) == []
    assert timezone.now() - job.started_at < timedelta(minutes=5)
