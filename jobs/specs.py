"""What a user asks for (JobSpec), the errors that refuse it, and the JobRequest it becomes."""

from __future__ import annotations

import os
import re
import secrets
import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings

from condor_bridge import JobRequest

from .errors import JobSubmissionError
from .inputs import data_transfer_urls
from .models import Job

OUTPUTS = "outputs"


# A sweep run's parameter values, as JSON, for scripts that read them whole.
PARAMETERS_VARIABLE = "NIGHTSHIFT_PARAMETERS"
# The site's package mirror (settings.PACKAGE_INDEX_URL), for the launcher on the workstation.
INDEX_VARIABLE = "NIGHTSHIFT_PACKAGE_INDEX_URL"


# Variables the launcher sets for every job, besides those starting with NIGHTSHIFT_.
RESERVED_ENVIRONMENT = frozenset({"PYTHONPATH", "PYTHONUNBUFFERED"})


class QuotaRefusal(JobSubmissionError):
    """A submission that would break a quota limit; the message names the limit and usage."""


class AccountNotApproved(JobSubmissionError):
    """A self-registered account that an admin or lab lead has not approved yet."""


class SubmissionsPaused(JobSubmissionError):
    """The portal is drained for maintenance; nothing was written."""


class JobActionError(Exception):
    """An action on a job that cannot be done now; the message says why."""


@dataclass(frozen=True)
class JobSpec:
    """What a user asks for, in plain terms, from the web form, the API or the CLI."""

    name: str
    arguments: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    gpus: int = 0
    gpu_memory_gb: float | None = None
    gpu_capability: float | None = None
    cpus: int = 1
    memory_mb: int = 2048
    disk_mb: int = 4096
    max_runtime_s: int | None = None
    # When the user wants it finished: said likely or not, and ahead of their other jobs.
    finish_by: datetime | None = None
    notify_by_email: bool = False
    # For a project archive: how to start it, e.g. "python train.py --epochs 10".
    entry_command: str | None = None
    # Files or folders at the top of the job's folder to keep and offer for download.
    output_paths: list[str] = field(default_factory=lambda: [OUTPUTS])
    # The Python and container image, when no environment sets them; None: the site's.
    python: str | None = None
    container_image: str | None = None
    # The software environment by name, NAME or NAME@VERSION (the environments app resolves
    # it); None: the site's default environment, or the job's own requirements.txt.
    software: str | None = None
    # The lab to charge (one of the user's); None: their first lab, or none if they have none.
    lab_id: int | None = None
    # Datasets by name, NAME or NAME@VERSION (the datasets app resolves them); each appears
    # read-only at datasets/<name>/ in the job.
    datasets: list[str] = field(default_factory=list)
    # Published models by LAB/NAME or LAB/NAME@VERSION (the model registry resolves them);
    # each appears read-only at models/<name>/ in the job, for fine-tuning or evaluation.
    models: list[str] = field(default_factory=list)
    # Web services to reach through the portal while the job runs: "tensorboard" (the
    # launcher starts it on nightshift.tensorboard_dir()) and "serve" (the job's own HTTP
    # endpoint on NIGHTSHIFT_SERVE_PORT).
    live_services: list[str] = field(default_factory=list)
    # A notebook session ends itself after this long running (live_sessions.sessions).
    session_limit_s: int | None = None


JOB_NAME_MAX_LENGTH = 200
# What a job may run for its owner to open while it runs (condor_bridge.types.LIVE_SERVICES).
LIVE_SERVICE_CHOICES = [
    ("tensorboard", "TensorBoard, on the job's event files"),
    ("serve", "Serve HTTP: the job's own endpoint, e.g. a model's API"),
]

_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def job_default_name(*, uploaded_name: str | None, source: Job | None = None) -> str:
    """The name of a job submitted without one: its uploaded file's name as the user called
    it (train.py, project.tar.gz), else the name of the job whose files it copies."""
    base = os.path.basename((uploaded_name or "").replace("\\", "/"))
    # A file's name may hold what a typed name may not (a tab, a line break): spaces instead.
    base = " ".join(_CONTROL_CHARACTERS.sub(" ", base).split())
    if base:
        return base[:JOB_NAME_MAX_LENGTH]
    return source.name if source is not None else "untitled job"


# The lab's jobs with a deadline share one HTCondor submitter in the lab's group, so that the
# negotiator orders them by deadline (job priority orders one submitter's jobs only) and
# takes them ahead of the lab's other users while the lane's own usage stays low. No user's
# accounting name can be this: each ends in "-<id>".
DEADLINE_ACCOUNTING_USER = "deadlines"


def accounting_user_for(user) -> str:
    """HTCondor accounting names allow letters, digits, '_' and '-' only."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", user.get_username())[:40].strip("_") or "user"
    return f"{slug}-{user.pk}"


def request_from_json(stored: dict, *, job_id: str, job_dir: str) -> JobRequest:
    """A JobRequest from the JSON form kept in Job.request (lists where it has tuples)."""
    fields = dict(stored)
    fields["arguments"] = tuple(fields.get("arguments", ()))
    fields["environment"] = tuple(tuple(pair) for pair in fields.get("environment", ()))
    fields["output_paths"] = tuple(fields.get("output_paths", (OUTPUTS,)))
    fields["input_files"] = tuple(fields.get("input_files", ()))
    fields["dataset_urls"] = tuple(fields.get("dataset_urls", ()))
    fields["live_services"] = tuple(fields.get("live_services", ()))
    fields.setdefault("python", settings.JOB_PYTHON)
    return JobRequest(job_id=job_id, job_dir=job_dir, **fields)


def deadline_of(request: dict) -> datetime | None:
    """When a job's stored request wants it finished, or None."""
    seconds = (request or {}).get("finish_by_s")
    return datetime.fromtimestamp(seconds, tz=UTC) if seconds else None


def job_request_of(job: Job) -> JobRequest:
    return request_from_json(job.request, job_id=str(job.public_id), job_dir=job.output_dir)


def request_fields(
    spec: JobSpec,
    *,
    script_name: str,
    user,
    input_files: list[str] | None = None,
    install_requirements: bool = False,
    lab=None,
    remove_after_s: int | None = None,
    seed: int | None = None,
    software: dict | None = None,
    datasets: list[dict] | None = None,
) -> dict:
    """Job.request for `spec`; `software` (StagedFiles.software) sets the Python and image,
    `datasets` (StagedFiles.datasets) what HTCondor's file transfer brings in spool mode."""
    python = (software or {}).get("python") or spec.python or settings.JOB_PYTHON
    container_image = (software or {}).get("container_image") or spec.container_image
    stored = {
        "script_name": script_name,
        "input_files": list(input_files or []),
        "install_requirements": install_requirements,
        "arguments": list(spec.arguments),
        "environment": [[key, value] for key, value in spec.environment.items()]
        + ([[INDEX_VARIABLE, settings.PACKAGE_INDEX_URL]] if settings.PACKAGE_INDEX_URL else []),
        "gpus": spec.gpus,
        "gpu_memory_gb": spec.gpu_memory_gb,
        "gpu_capability": spec.gpu_capability,
        "cpus": spec.cpus,
        "memory_mb": spec.memory_mb,
        "disk_mb": spec.disk_mb,
        "max_runtime_s": spec.max_runtime_s,
        "remove_after_s": remove_after_s,
        "output_paths": list(spec.output_paths) or [OUTPUTS],
        "accounting_group": lab.accounting_group if lab else settings.DEFAULT_ACCOUNTING_GROUP,
        "accounting_user": accounting_user_for(user),
        "python": python,
        "container_image": container_image,
        "vacate_grace_s": settings.CHECKPOINT_GRACE_S,
        "checkpoint_interval_s": settings.CHECKPOINT_INTERVAL_S,
        "max_starts": settings.MAX_JOB_STARTS or None,
        "job_lease_s": settings.JOB_LEASE_S,
        "seed": seed,
    }
    urls = data_transfer_urls(datasets)
    if urls:
        stored["dataset_urls"] = urls
    if spec.live_services:
        stored["live_services"] = list(spec.live_services)
    if spec.finish_by is not None:
        stored["finish_by_s"] = int(spec.finish_by.timestamp())
        stored["accounting_user"] = DEADLINE_ACCOUNTING_USER
    if "notebook" in spec.live_services:
        stored["session_limit_s"] = spec.session_limit_s
        stored["session_idle_s"] = settings.LIVE_SESSION_IDLE_S or None
    return stored


def parse_entry_command(command: str) -> tuple[str, list[str]]:
    """`python train.py --epochs 10` -> ("train.py", ["--epochs", "10"])."""
    check = command.strip()
    if not check:
        raise JobSubmissionError(
            "entry_command", "Say how to start the project, e.g. python train.py --epochs 10."
        )
    try:
        words = shlex.split(check)
    except ValueError as exc:
        raise JobSubmissionError("entry_command", f"Check the quotes: {exc}.") from None
    if words[0] not in ("python", "python3") or len(words) < 2:
        raise JobSubmissionError(
            "entry_command", "Start with python and the script, e.g. python train.py --epochs 10."
        )
    script = words[1].removeprefix("./")
    if not script.endswith(".py"):
        raise JobSubmissionError("entry_command", f"{words[1]} is not a Python file (.py).")
    return script, words[2:]


def new_seed() -> int:
    """A job's NIGHTSHIFT_SEED: random, and kept so that the job can be reproduced."""
    return secrets.randbelow(2**31)


def job_spec_of(job: Job) -> JobSpec:
    """The plain-terms request a job was submitted with (for clone and re-run)."""
    request = job.request
    entry_command = job.source.get("entry_command")
    arguments = list(request.get("arguments", []))
    if entry_command:
        arguments = arguments[len(parse_entry_command(entry_command)[1]) :]
    environment = dict(request.get("environment", []))
    # A sweep run's parameters travel as parameters (job_rerun), not as a variable the
    # user set: NIGHTSHIFT_ names are the portal's.
    environment.pop(PARAMETERS_VARIABLE, None)
    environment.pop(INDEX_VARIABLE, None)
    return JobSpec(
        name=job.name,
        entry_command=entry_command,
        arguments=arguments,
        environment=environment,
        gpus=request.get("gpus", 0),
        gpu_memory_gb=request.get("gpu_memory_gb"),
        gpu_capability=request.get("gpu_capability"),
        cpus=request.get("cpus", 1),
        memory_mb=request.get("memory_mb", 2048),
        disk_mb=request.get("disk_mb", 4096),
        max_runtime_s=request.get("max_runtime_s"),
        output_paths=list(request.get("output_paths") or [OUTPUTS]),
        notify_by_email=job.notify_by_email,
        python=request.get("python"),
        container_image=request.get("container_image"),
        software=(job.source.get("environment") or {}).get("reference"),
        lab_id=job.lab_id,
        datasets=[dataset["reference"] for dataset in job.source.get("datasets") or []],
        models=[model["reference"] for model in job.source.get("models") or []],
        live_services=list(request.get("live_services") or []),
        # No deadline: a re-run or a clone asks for its own (the original's may have passed).
        session_limit_s=request.get("session_limit_s"),
    )
