"""What a user does to a job: cancel, hold, release, vacate, re-run."""

from __future__ import annotations

import dataclasses

from django.db import transaction
from django.utils import timezone

from audit.services import audit_record
from condor_bridge import BridgeError

from .bridge import get_bridge
from .models import Job, JobOutcome, JobState
from .specs import JobActionError, job_spec_of
from .submission import job_submit
from .timeline import job_event_record


def job_rerun(*, job: Job, user) -> Job:
    """The same job again, exactly: the same files, settings and seed (a sweep run's
    parameters included, as a job of its own). The new job records what it reproduces."""
    spec = job_spec_of(job)
    return job_submit(
        user=user,
        spec=dataclasses.replace(spec, name=_rerun_name(job.name)),
        copy_from=job,
        parameters=job.parameters or None,
        seed=job.seed,
        reproduces=job,
    )


def _rerun_name(name: str) -> str:
    suffix = " (re-run)"
    return name if name.endswith(suffix) else (name[: 200 - len(suffix)] + suffix)


def job_hold(*, job: Job, user) -> Job:
    """Pause a queued or running job in HTCondor until it is released."""
    return _act_on_job(
        job,
        user,
        "hold",
        allowed=(JobState.IDLE, JobState.RUNNING, JobState.SUSPENDED),
        refusal="Only a waiting or running job can be held.",
        reason=f"Held by {user.get_username()} from Nightshift",
        kind="hold requested",
        detail=f"Held by {user.get_username()}",
    )


def job_release(*, job: Job, user) -> Job:
    """Let a held job run again."""
    return _act_on_job(
        job,
        user,
        "release",
        allowed=(JobState.HELD,),
        refusal="Only a held job can be released.",
        reason="",
        kind="release requested",
        detail=f"Released by {user.get_username()}",
    )


def job_vacate(*, job: Job, user) -> Job:
    """Move a running job off its workstation, as its owner's return would: SIGTERM, time to
    checkpoint, then the next free workstation. For admins freeing a machine."""
    return _act_on_job(
        job,
        user,
        "vacate",
        allowed=(JobState.RUNNING,),
        refusal="Only a running job can be moved off its workstation.",
        reason="",
        kind="vacate requested",
        detail=f"Moved off {job.workstation or 'its workstation'} by {user.get_username()}",
    )


def _act_on_job(job, user, action, *, allowed, refusal, reason, kind, detail) -> Job:
    bridge = get_bridge(job.schedd)
    with transaction.atomic():
        job = Job.objects.select_for_update(no_key=True).get(pk=job.pk)
        if job.state not in allowed or not job.is_submitted:
            raise JobActionError(refusal)
        try:
            bridge.act(action, job.cluster_id, job.proc_id, reason=reason)
        except BridgeError as exc:
            raise JobActionError(f"HTCondor could not {action} the job: {exc}") from exc
        job_event_record(job, kind, detail, actor=user)
        audit_record(action=f"job.{action}", actor=user, target=job, detail=detail)
    return job


def job_cancel(*, job: Job, user) -> Job:
    """Remove a job from the pool (or stop it before it gets there)."""
    bridge = get_bridge(job.schedd)
    with transaction.atomic():
        job = Job.objects.select_for_update(no_key=True).get(pk=job.pk)
        if job.is_final:
            raise JobActionError(f"This job has already ended ({job.get_state_display()}).")
        if not job.is_submitted:
            job.state, job.finished_at = JobState.REMOVED, timezone.now()
            job.outcome = JobOutcome.CANCELLED
            job.status_detail = f"Cancelled by {user.get_username()} before it reached HTCondor."
            job.save()
            job_event_record(job, "cancelled", job.status_detail, actor=user)
            audit_record(action="job.cancel", actor=user, target=job, detail=job.status_detail)
            return job
        try:
            bridge.act("remove", job.cluster_id, job.proc_id, reason=f"Cancelled by user {user.pk}")
        except BridgeError as exc:
            raise JobActionError(f"HTCondor could not remove the job: {exc}") from exc
        job.status_detail = "Cancelling…"
        job.save(update_fields=["status_detail"])
        job_event_record(job, "cancel requested", f"Cancelled by {user.get_username()}", actor=user)
        audit_record(action="job.cancel", actor=user, target=job, detail="removal requested")
    return job
