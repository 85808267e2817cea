"""Email to a job's owner when it completes, fails or is held."""

from __future__ import annotations

from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse

from plumbing.tasks import enqueue

from .models import Job, JobState
from .timeline import job_event_record

NOTIFY_STATES = (JobState.COMPLETED, JobState.FAILED, JobState.HELD)


def notify_enqueue(job_pk: int, state: str) -> None:
    enqueue("jobs.tasks.notify_job", job_pk, state)


def job_notify(job_pk: int, state: str) -> bool:
    """Email the job's owner that it completed, failed or is held. True when sent."""
    job = Job.objects.select_related("owner").get(pk=job_pk)
    if not job.notify_by_email or not job.owner.email or state not in NOTIFY_STATES:
        return False
    label = JobState(state).label.lower()
    url = settings.PORTAL_URL.rstrip("/") + reverse("jobs:detail", args=[job.public_id])
    lines = [f"Your Nightshift job “{job.name}” is {label}.", ""]
    if state == JobState.HELD and job.hold_explanation:
        lines += [job.hold_explanation.title, job.hold_explanation.advice, ""]
    elif job.exit_code is not None:
        lines += [f"It exited with code {job.exit_code}.", ""]
    lines += [f"Details, logs and outputs: {url}"]
    send_mail(
        subject=f"[Nightshift] {job.name}: {label}",
        message="\n".join(lines),
        from_email=None,
        recipient_list=[job.owner.email],
    )
    job_event_record(job, "email sent", f"Told {job.owner.email} the job is {label}")
    return True
