"""Email when a job completes, fails or is held, only for students who asked for it."""

import pytest
from django.core import mail

from condor_bridge import JobState as CondorState
from jobs import notifications, specs, submission, sync
from jobs.models import JobState
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent_now(monkeypatch):
    """Run the notification task in-process instead of through a worker."""
    monkeypatch.setattr("jobs.tasks.notify_job.delay", notifications.job_notify)
    monkeypatch.setattr("jobs.tasks.collect_outputs.delay", lambda pk: None)


def submitted(user, notify: bool):
    job = submission.job_submit(
        user=user, spec=specs.JobSpec(name="mnist", notify_by_email=notify),
        script=script_upload(),
    )  # fmt: skip
    return submission.job_submit_to_pool(job.pk)


def test_a_student_who_opted_in_hears_that_the_job_completed(
    student, fake_bridge, sent_now, django_capture_on_commit_callbacks, settings
):
    settings.PORTAL_URL = "https://nightshift.example.edu"
    job = submitted(student, notify=True)
    fake_bridge.set_state(str(job.public_id), CondorState.COMPLETED, exit_code=0)
    with django_capture_on_commit_callbacks(execute=True):
        sync.jobs_sync()
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == [student.email]
    assert message.subject == "[Nightshift] mnist: completed"
    assert f"https://nightshift.example.edu/jobs/{job.public_id}/" in message.body
    assert job.events.filter(kind="email sent").exists()


def test_a_held_job_email_explains_the_hold(
    student, fake_bridge, sent_now, django_capture_on_commit_callbacks
):
    job = submitted(student, notify=True)
    fake_bridge.set_state(
        str(job.public_id), CondorState.HELD, hold_reason="over memory",
        hold_reason_code=34, hold_reason_subcode=102,
    )  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        sync.jobs_sync()
    assert "It used more memory than it asked for." in mail.outbox[0].body


def test_no_email_without_opting_in(
    student, fake_bridge, sent_now, django_capture_on_commit_callbacks
):
    job = submitted(student, notify=False)
    fake_bridge.set_state(str(job.public_id), CondorState.COMPLETED, exit_code=1)
    with django_capture_on_commit_callbacks(execute=True):
        sync.jobs_sync()
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert mail.outbox == []


def test_running_is_not_worth_an_email(
    student, fake_bridge, sent_now, django_capture_on_commit_callbacks
):
    job = submitted(student, notify=True)
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING)
    with django_capture_on_commit_callbacks(execute=True):
        sync.jobs_sync()
    assert mail.outbox == []
