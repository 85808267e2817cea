"""A job named in a request, for the web pages and the API alike.

Another user's job, like one that does not exist or an id that is not one, is a 404, so
that its existence never leaks. A job the user may read but not act on (a lab lead's view
of a member's job) is a 403 when they try to act.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404

from plumbing.api import ApiError

from . import selectors
from .models import Job


def _get(find, user, public_id) -> Job:
    try:
        return find(user, public_id)
    except (Job.DoesNotExist, ValidationError, ValueError):
        raise Http404("No such job.") from None
    except selectors.AmbiguousJobId as exc:
        # Only the API takes the start of an id (the pages' addresses hold the whole one).
        raise ApiError(str(exc), code="ambiguous", status_code=400) from None


def own_job_or_403(user, public_id) -> Job:
    """A job of the user's own: for clone and re-run, which copy its files into a new job
    under the user's name. A lead or admin who can read another's job gets a 403."""
    job = visible_job_or_404(user, public_id)
    if job.owner_id != user.pk:
        raise PermissionDenied("Only the job's owner can re-run or copy it.")
    return job


def visible_job_or_404(user, public_id) -> Job:
    """A job the user may read: theirs, their led lab's, or any for staff."""
    return _get(selectors.job_get_visible, user, public_id)


def actionable_job_or_403(user, public_id) -> Job:
    """A job the user may cancel, hold or release: the owner's, or any for staff."""
    job = visible_job_or_404(user, public_id)
    if not selectors.job_can_act(user, job):
        raise PermissionDenied("Only the job's owner can do that; a lab lead can only read it.")
    return job
