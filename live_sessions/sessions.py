"""Notebook sessions: JupyterLab on an idle workstation, as a job whose script is
nightshift.run_notebook(). They count against quotas like any job."""

from __future__ import annotations

import dataclasses
import json

from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from jobs.models import FINAL_STATES, Job, JobOutcome, JobState
from jobs.services import (
    JobSpec,
    JobSubmissionError,
    SoftwareChoice,
    SoftwareNotFound,
    job_submit,
    software_lookup,
)

NOTEBOOK_SCRIPT = b'''"""A Nightshift notebook session: JupyterLab, reached through the portal.

What you save in the session folder (this job's outputs/) is kept with the job."""
import nightshift

nightshift.run_notebook()
'''
# Not notebook.py: Jupyter imports a package of that name, and would find the script.
NOTEBOOK_SCRIPT_NAME = "nightshift_session.py"
NOTEBOOK_PACKAGE = "jupyterlab"
WARN_BEFORE_END_S = 10 * 60


def session_open_count(user) -> int:
    return (
        Job.objects.filter(owner=user, request__live_services__contains=["notebook"])
        .exclude(state__in=FINAL_STATES)
        .count()
    )


def notebook_problem(choice: SoftwareChoice) -> str | None:
    """Why a session cannot start with this environment, with the one line that fixes it;
    None when it can. An image's packages are unknown: it is taken at its word."""
    if choice.container_image or NOTEBOOK_PACKAGE in choice.packages:
        return None
    name = choice.reference.rsplit("@", 1)[0]
    return (
        f"{name} has no JupyterLab, which a notebook session runs. Add this line to its "
        f"requirements (a new version, on its environment page): {NOTEBOOK_PACKAGE} — or "
        "choose Notebook, the site's environment for notebooks."
    )


def session_submit(*, user, spec: JobSpec) -> Job:
    """A notebook session for `spec` (its resources, environment, datasets and time limit),
    refused with the reason where the user has too many open or the environment has no
    JupyterLab."""
    open_now = session_open_count(user)
    if open_now >= settings.LIVE_MAX_OPEN_SESSIONS:
        raise JobSubmissionError(
            "name",
            f"You have {open_now} notebook session{'s' * (open_now != 1)} open, the "
            "most one person may have at once: end one first.",
        )
    limit_s = spec.session_limit_s or round(settings.LIVE_SESSION_DEFAULT_HOURS * 3600)
    if limit_s > settings.LIVE_SESSION_MAX_HOURS * 3600:
        raise JobSubmissionError(
            "hours", f"A session may last at most {settings.LIVE_SESSION_MAX_HOURS:g} hours."
        )
    if not spec.software:
        raise JobSubmissionError(
            "software_environment",
            "Choose an environment with jupyterlab in it (make one on "
            "the Environments page: a line jupyterlab, and the packages you work with).",
        )
    try:
        choice = software_lookup(user, spec.software)
    except SoftwareNotFound as exc:
        raise JobSubmissionError("software_environment", str(exc)) from None
    problem = notebook_problem(choice)
    if problem:
        raise JobSubmissionError("software_environment", problem)
    spec = dataclasses.replace(
        spec,
        live_services=["notebook"],
        session_limit_s=limit_s,
        max_runtime_s=None,
        entry_command=None,
        arguments=[],
        output_paths=["outputs"],
    )
    return job_submit(
        user=user, spec=spec, script=SimpleUploadedFile(NOTEBOOK_SCRIPT_NAME, NOTEBOOK_SCRIPT)
    )


@dataclasses.dataclass(frozen=True)
class SessionStatus:
    state: str
    state_label: str
    running: bool
    seconds_left: int | None
    warn: bool
    ended: str

    def as_json(self) -> dict:
        return dataclasses.asdict(self)


SESSION_END_FILE = ".nightshift/session-end.json"


def session_status(job: Job, *, now) -> SessionStatus:
    """What the session page shows: time left, the warning before the end, why it ended."""
    limit = job.request.get("session_limit_s")
    running = job.state == JobState.RUNNING
    seconds_left = None
    if running and limit and job.started_at:
        started = job.started_at
        last_start = job.usage_records.order_by("-started_at").values_list("started_at", flat=True)
        started = last_start.first() or started
        seconds_left = max(0, int(limit - (now - started).total_seconds()))
    warn = seconds_left is not None and seconds_left <= WARN_BEFORE_END_S
    ended = session_end_reason(job)
    return SessionStatus(
        state=job.state,
        state_label="Ended" if ended else job.get_state_display(),
        running=running,
        seconds_left=seconds_left,
        warn=warn,
        ended=ended,
    )


def session_end_reason(job: Job) -> str:
    if job.state not in FINAL_STATES:
        return ""
    kept = " The files you saved in the session folder are kept with the job's outputs."
    ended = job.events.filter(kind="session ended").order_by("-at").first()
    if ended is not None:
        return ended.detail
    try:
        with open(job.directory / SESSION_END_FILE, encoding="utf-8") as stream:
            reason = json.load(stream).get("reason")
    except (OSError, ValueError, AttributeError):
        reason = None
    if reason == "time limit":
        hours = (job.request.get("session_limit_s") or 0) / 3600
        return f"The session reached its time limit of {hours:g} hours." + kept
    if reason == "idle":
        minutes = (job.request.get("session_idle_s") or 0) // 60
        return f"The session ended after {minutes} minutes without activity." + kept
    if job.outcome == JobOutcome.RUNTIME_LIMIT:
        # Its helper did not end it in time: HTCondor did (condor_bridge.submit).
        return (job.status_detail or "The session reached its time limit.") + kept
    if job.outcome == "cancelled":
        return "You ended the session." + kept
    if job.state == JobState.FAILED:
        return "JupyterLab stopped with an error: see the job's log." + kept
    return "The session ended." + kept
