"""Who may reach what through the live proxy: the database's answer to one request, given
the job and service its path names and the caller's cookie or token. The proxy
(live_sessions.proxy) only carries requests; it asks here."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model

from jobs.models import Job, JobState

from .boards import LocalTarget
from .selectors import live_is_running, live_job_for, live_token_owner
from .services import live_cookie, live_cookie_read, live_ticket_read
from .tunnels import Target


@dataclass(frozen=True)
class Decision:
    """What the database says about one request."""

    status: int  # 200: go ahead; 404: nothing here; 503: the job is not running
    target: Target | LocalTarget | None = None
    message: str = ""
    user_id: int | None = None


SERVICE_NAMES = {"tensorboard": "TensorBoard", "serve": "served endpoint", "notebook": "JupyterLab"}


def service_name(service: str) -> str:
    return SERVICE_NAMES.get(service, service)


def _user(user_id: int | None):
    return get_user_model().objects.filter(pk=user_id).first() if user_id else None


def access_decide(
    public_id: str, service: str, *, user_id: int | None, token: str | None
) -> Decision:
    """A request for `service` of the job `public_id`, by the user a cookie named or with a
    live token (the served endpoint only): the job's tunnel target, or why not."""
    if token is not None:
        found = live_token_owner(token, public_id) if service == "serve" else None
        user = found.user if found else None
    else:
        user = _user(user_id)
    job = live_job_for(user, public_id, service) if user else None
    if job is None:
        return Decision(404)
    if service == "tensorboard" and job.is_final:
        return _finished_tensorboard(job, user.pk)
    if not live_is_running(job) or job.cluster_id is None:
        return Decision(
            503,
            message=f"The job is {job.get_state_display().lower()}, not running: its "
            f"{service_name(service)} is open only while it runs.",
            user_id=user.pk,
        )
    target = Target(
        key=str(job.public_id),
        cluster_id=job.cluster_id,
        proc_id=job.proc_id or 0,
        python=job.request.get("python") or "/usr/bin/python3",
        schedd=job.schedd,
        secret=job.live_secret if service == "notebook" else "",
    )
    return Decision(200, target=target, user_id=user.pk)


def access_enter(
    public_id: str, service: str, ticket: str, bound_to: str
) -> tuple[int | None, str]:
    """The user a fresh ticket names, if this browser is the one it was made for (its
    binding secret, from the proxy's cookie), and the cookie that lets them in from now on."""
    user = _user(live_ticket_read(ticket, public_id=public_id, service=service, bound_to=bound_to))
    if user is None or live_job_for(user, public_id, service) is None:
        return None, ""
    value = live_cookie(
        user_id=user.pk, session_hash=user.get_session_auth_hash(), public_id=public_id
    )
    return user.pk, value


def access_cookie_user(public_id: str, value: str) -> int | None:
    return live_cookie_read(value, public_id=public_id)


def access_running_jobs(keys: list[str]) -> set[str]:
    """Which of these jobs (public ids) run now: the others' tunnels close."""
    running = Job.objects.filter(public_id__in=keys, state=JobState.RUNNING)
    return {str(public_id) for public_id in running.values_list("public_id", flat=True)}


def finished_logdir(job: Job) -> Path | None:
    """The event files a finished job kept (outputs/tensorboard), if they are plainly its
    own: no link anywhere on the way, which could lead the portal's TensorBoard into
    another job's folder."""
    outputs = (job.request.get("output_paths") or ["outputs"])[0]
    folder = Path(job.output_dir) / outputs / "tensorboard"
    top = Path(job.output_dir)
    for path in (top / outputs, folder):
        if path.is_symlink() or not path.is_dir():
            return None
    for root, folders, files in os.walk(folder, followlinks=False):
        for name in (*folders, *files):
            if os.path.islink(os.path.join(root, name)):
                return None
        if files:
            return folder
    return None


def _finished_tensorboard(job: Job, user_id: int) -> Decision:
    logdir = finished_logdir(job)
    if logdir is None:
        return Decision(
            503,
            user_id=user_id,
            message="The job has ended without TensorBoard event files "
            "of its own in outputs/tensorboard (nightshift.tensorboard_dir()).",
        )
    return Decision(200, target=LocalTarget(key=str(job.public_id), logdir=logdir), user_id=user_id)
