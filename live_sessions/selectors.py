from __future__ import annotations

import uuid

from django.utils import timezone

from jobs.models import Job, JobState
from jobs.selectors import job_list_visible_to

from .models import LiveShare, LiveToken, token_digest
from .sessions import WARN_BEFORE_END_S as WARN_BEFORE_END_S
from .sessions import session_status as session_status


def live_job_or_none(public_id: str) -> Job | None:
    try:
        key = uuid.UUID(str(public_id))
    except ValueError:
        return None
    if str(key) != str(public_id):  # one spelling only: no upper case, braces or urn:
        return None
    return Job.objects.select_related("lab", "owner").filter(public_id=key).first()


def live_may_open(user, job: Job) -> bool:
    """The owner; the leads of its lab and the admins only if the owner shared it."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    if job.owner_id == user.pk:
        return True
    if not LiveShare.objects.filter(job=job).exists():
        return False
    return job_list_visible_to(user).filter(pk=job.pk).exists()


def live_job_for(user, public_id: str, service: str) -> Job | None:
    """The job whose `service` the user may open; None for anything else, so that a
    stranger learns nothing (not even that the job exists)."""
    job = live_job_or_none(public_id)
    if job is None or service not in job.live_services or not live_may_open(user, job):
        return None
    return job


def live_is_running(job: Job) -> bool:
    return job.state == JobState.RUNNING


def live_token_owner(token: str, public_id: str) -> LiveToken | None:
    """The active token for this job's served endpoint; its user must still own the job or
    be let in by the share."""
    if not token.startswith(LiveToken.PREFIX) or len(token) > 100:
        return None
    found = (
        LiveToken.objects.select_related("job", "user")
        .filter(digest=token_digest(token), revoked_at__isnull=True)
        .first()
    )
    if found is None or str(found.job.public_id) != str(public_id):
        return None
    if not live_may_open(found.user, found.job):
        return None
    if found.last_used_at is None or (timezone.now() - found.last_used_at).total_seconds() > 60:
        LiveToken.objects.filter(pk=found.pk).update(last_used_at=timezone.now())
    return found


def live_tokens_of(job: Job, user) -> list[LiveToken]:
    return list(job.live_tokens.filter(user=user, revoked_at__isnull=True))


def live_is_shared(job: Job) -> bool:
    return LiveShare.objects.filter(job=job).exists()
