"""Everything that changes a job. Views and Celery tasks only call these."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import secrets
import shlex
import shutil
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

from django.conf import settings
from django.core.cache import cache
from django.core.files import File
from django.core.files.uploadedfile import UploadedFile
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.urls import reverse
from django.utils import timezone

from accounting.services import recorded_runs, usage_outdated, usage_record_observations
from accounts.registration import user_may_submit
from audit.services import audit_record
from condor_bridge import (
    BridgeError,
    InvalidJobRequest,
    JobObservation,
    JobRequest,
    MatchSummary,
    summarize_matches,
)
from condor_bridge import JobState as CondorState
from condor_bridge.explain import SUBCODE_NIGHTSHIFT_NO_PROGRESS
from condor_bridge.submit import (
    HELPER_DIR,
    INSTALL_LOG,
    METRICS_FILE,
    STDERR,
    STDOUT,
    description_text,
)
from condor_bridge.types import check_text
from labs.models import Lab
from labs.quotas import QuotaExceeded, lock_quota, quota_check
from operations import metrics
from operations.drain import drain_state
from portal.db import bulk_update_rows

from .archives import (
    ARCHIVE_SUFFIXES,
    ArchiveError,
    ArchiveLimits,
    check_archive,
    extract_archive,
    is_archive,
)
from .bridge import get_bridge
from .models import FINAL_STATES, Job, JobEvent, JobOutcome, JobState, Sweep, Workstation
from .selectors import checkpoint_of, job_output_files, open_job_file

logger = logging.getLogger(__name__)
event_log = logging.getLogger("nightshift.jobs")

OUTPUTS = "outputs"
HELPER_MODULE = Path(__file__).resolve().parent / "runtime" / "nightshift.py"
LAUNCHER_MODULE = Path(__file__).resolve().parent / "runtime" / "launch.py"
# Where a project's original archive is kept, for clone and re-run. Never sent to the pool.
SOURCE_DIR = ".source"
# A single script's optional requirements file, installed before it runs.
SCRIPT_REQUIREMENTS = "requirements.txt"
MAX_REQUIREMENTS_BYTES = 1024 * 1024
# Inside the helper folder, kept by the portal (not given to the pool): where it leaves
# requests for the running job, such as a study's request to stop a pruned trial.
CONTROL_DIR = "control"
# A sweep run's parameter values, as JSON, for scripts that read them whole.
PARAMETERS_VARIABLE = "NIGHTSHIFT_PARAMETERS"
# Variables the launcher sets for every job, besides those starting with NIGHTSHIFT_.
RESERVED_ENVIRONMENT = frozenset({"PYTHONPATH", "PYTHONUNBUFFERED"})
_SAFE_SCRIPT_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


class JobSubmissionError(Exception):
    """A submission refused before anything reached HTCondor. `field` names the input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


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
    notify_by_email: bool = False
    # For a project archive: how to start it, e.g. "python train.py --epochs 10".
    entry_command: str | None = None
    # Files or folders at the top of the job's folder to keep and offer for download.
    output_paths: list[str] = field(default_factory=lambda: [OUTPUTS])
    # The software environment (from an admin's preset); None: the site default Python.
    python: str | None = None
    container_image: str | None = None
    # The lab to charge (one of the user's); None: their first lab, or none if they have none.
    lab_id: int | None = None


JOB_NAME_MAX_LENGTH = 200
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


def safe_script_name(uploaded_name: str) -> str:
    """A file name HTCondor and the shell take literally, keeping what the user called it."""
    base = os.path.basename(uploaded_name.replace("\\", "/"))
    stem = base[:-3] if base.lower().endswith(".py") else base
    stem = _SAFE_SCRIPT_CHARS.sub("_", stem).strip("._-")[:80]
    return f"{stem or 'train'}.py"


def accounting_user_for(user) -> str:
    """HTCondor accounting names allow letters, digits, '_' and '-' only."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", user.get_username())[:40].strip("_") or "user"
    return f"{slug}-{user.pk}"


def _request_from_json(stored: dict, *, job_id: str, job_dir: str) -> JobRequest:
    """A JobRequest from the JSON form kept in Job.request (lists where it has tuples)."""
    fields = dict(stored)
    fields["arguments"] = tuple(fields.get("arguments", ()))
    fields["environment"] = tuple(tuple(pair) for pair in fields.get("environment", ()))
    fields["output_paths"] = tuple(fields.get("output_paths", (OUTPUTS,)))
    fields["input_files"] = tuple(fields.get("input_files", ()))
    fields.setdefault("python", settings.JOB_PYTHON)
    return JobRequest(job_id=job_id, job_dir=job_dir, **fields)


def _job_request(job: Job) -> JobRequest:
    return _request_from_json(job.request, job_id=str(job.public_id), job_dir=job.output_dir)


def _request_fields(
    spec: JobSpec,
    *,
    script_name: str,
    user,
    input_files: list[str] | None = None,
    install_requirements: bool = False,
    lab=None,
    remove_after_s: int | None = None,
    seed: int | None = None,
) -> dict:
    return {
        "script_name": script_name,
        "input_files": list(input_files or []),
        "install_requirements": install_requirements,
        "arguments": list(spec.arguments),
        "environment": [[key, value] for key, value in spec.environment.items()],
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
        "python": spec.python or settings.JOB_PYTHON,
        "container_image": spec.container_image,
        "vacate_grace_s": settings.CHECKPOINT_GRACE_S,
        "checkpoint_interval_s": settings.CHECKPOINT_INTERVAL_S,
        "max_starts": settings.MAX_JOB_STARTS or None,
        "job_lease_s": settings.JOB_LEASE_S,
        "seed": seed,
    }


def _install_helper(directory: Path, *, link_from: Path | None = None) -> None:
    """The outputs folder and the job helper, in a job's folder that the pool may write.

    `link_from`, another job's folder with the helper installed, has its helper files
    hard-linked instead of copied (a sweep's runs): they are the portal's, read-only.
    """
    (directory / OUTPUTS).mkdir(exist_ok=True)
    helper = directory / HELPER_DIR
    helper.mkdir()
    # The portal's to write, the job's to read: how a study asks a trial to stop.
    (helper / CONTROL_DIR).mkdir(mode=0o755)
    for module, name in ((HELPER_MODULE, "nightshift.py"), (LAUNCHER_MODULE, "launch.py")):
        try:
            if link_from is None:
                raise OSError("nothing to link from")
            (helper / name).hardlink_to(link_from / HELPER_DIR / name)
        except OSError:
            shutil.copyfile(module, helper / name)
    for path in (directory, directory / OUTPUTS, helper):
        _give_to_pool(path)


def _give_to_pool(path: Path) -> None:
    if settings.JOB_DIR_UID is not None:
        os.chown(path, settings.JOB_DIR_UID, -1)


def _record(job: Job, kind: str, detail: str = "", *, actor=None) -> JobEvent:
    event = JobEvent.objects.create(job=job, kind=kind, state=job.state, detail=detail,
                                    actor=actor)  # fmt: skip
    log_job_events([event])
    return event


def log_job_events(events: Iterable[JobEvent]) -> None:
    """Each event on the job's timeline is also a log line, with the job's id."""
    for event in events:
        event_log.info("%s (%s): %s", event.kind, event.state, event.detail,
                       extra={"job_id": str(event.job.public_id)})  # fmt: skip


def log_sweep_events(sweep: Sweep, events: Iterable[JobEvent]) -> None:
    """The same events for a sweep's runs, one line per kind with the sweep's id: a
    thousand runs make one line, not a thousand; each run's timeline has them all."""
    kinds = Counter(event.kind for event in events)
    for kind, count in kinds.items():
        event_log.info("%s: %s run%s of sweep %s", kind, count, "s" if count != 1 else "",
                       sweep.public_id, extra={"sweep_id": str(sweep.public_id)})  # fmt: skip


def lab_for_submission(*, user, lab_id: int | None) -> Lab | None:
    """The lab a job is charged to: the one asked for, which must be the user's, or their
    first lab, or none for a user in no lab."""
    labs = Lab.objects.filter(memberships__user=user)
    if lab_id is not None:
        lab = labs.filter(pk=lab_id).first()
        if lab is None:
            raise JobSubmissionError("lab", "You are not a member of that lab.")
        return lab
    return labs.order_by("memberships__joined_at", "name").first()


def _check_quota(user, lab: Lab | None, spec: JobSpec) -> int | None:
    """The runtime limit the quota sets for this job; QuotaRefusal when it does not fit."""
    try:
        return quota_check(user=user, lab=lab, gpus=spec.gpus, max_runtime_s=spec.max_runtime_s)
    except QuotaExceeded as exc:
        raise QuotaRefusal(exc.field or "quota", exc.message) from None


def job_validate_request(*, user, spec: JobSpec, script_name: str = "train.py") -> JobRequest:
    """The JobRequest `spec` would become; raises JobSubmissionError naming the field."""
    if not spec.name.strip():
        raise JobSubmissionError("name", "Give the job a name.")
    for key in spec.environment:
        if key.startswith("NIGHTSHIFT_") or key in RESERVED_ENVIRONMENT:
            raise JobSubmissionError(
                "environment", f"{key} is set by Nightshift; choose another name."
            )
    try:
        check_text("name", spec.name, max_length=200)
        if spec.entry_command:
            check_text("entry_command", spec.entry_command, max_length=4096)
        return _request_from_json(
            _request_fields(spec, script_name=script_name, user=user),
            job_id="validation",
            job_dir=str(settings.JOBS_DIR),
        )
    except InvalidJobRequest as exc:
        raise JobSubmissionError(exc.field, exc.message) from exc


PREVIEW_JOB_ID = "00000000-0000-4000-8000-000000000000"


def job_preview_description(*, user, spec: JobSpec, uploaded_name: str = "train.py") -> str:
    """The exact submit description `spec` becomes (the job's own id is given at submit)."""
    if is_archive(uploaded_name) and spec.entry_command:
        script_name, entry_arguments = parse_entry_command(spec.entry_command)
        spec = dataclasses.replace(spec, arguments=[*entry_arguments, *spec.arguments])
        # The archive's own top-level names are known once it is unpacked.
        extra = {"input_files": ["project"]}
    else:
        script_name, extra = safe_script_name(uploaded_name), {}
    job_validate_request(user=user, spec=spec)
    stored = _request_fields(spec, script_name=script_name, user=user, **extra)
    request = _request_from_json(
        stored, job_id=PREVIEW_JOB_ID, job_dir=str(settings.JOBS_DIR / PREVIEW_JOB_ID)
    )
    description = get_bridge().description(request)
    return "\n".join(f"{key} = {value}" for key, value in description.items()) + "\nqueue\n"


def job_match_summary(*, user, spec: JobSpec) -> MatchSummary | None:
    """How many workstations could run `spec`, and are free now; None if the pool is down."""
    return _match_summary(job_validate_request(user=user, spec=spec))


def _match_summary(request: JobRequest) -> MatchSummary | None:
    try:
        machines = get_bridge().pool_machines()
    except BridgeError:
        return None
    return summarize_matches(request, machines)


@dataclass(frozen=True)
class _StagedFiles:
    """What a job's folder holds once its upload (or copy) is in place."""

    script_name: str
    entry_arguments: list[str]
    input_files: list[str]
    install_requirements: bool
    source: dict
    origin: str


def _archive_limits() -> ArchiveLimits:
    return ArchiveLimits(
        max_files=settings.ARCHIVE_MAX_FILES,
        max_expanded_bytes=settings.ARCHIVE_MAX_EXPANDED_MB * 1024 * 1024,
    )


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


def _save_upload(upload: UploadedFile, target: Path) -> None:
    limit = settings.MAX_UPLOAD_MB * 1024 * 1024
    written = 0
    with open(target, "xb") as out:
        for chunk in upload.chunks():
            written += len(chunk)
            if written > limit:
                raise JobSubmissionError(
                    "script", f"The upload is larger than {settings.MAX_UPLOAD_MB} MB."
                )
            out.write(chunk)


def _stage_archive(directory: Path, archive: Path, entry_command: str) -> _StagedFiles:
    script_name, entry_arguments = parse_entry_command(entry_command)
    try:
        members = check_archive(archive, _archive_limits())
        files = {m.name for m in members if not m.is_dir}
        if script_name not in files:
            raise JobSubmissionError(
                "entry_command", f"The archive has no {script_name}; it has "
                f"{', '.join(sorted(f for f in files if f.endswith('.py'))[:5]) or 'no .py file'}."
            )  # fmt: skip
        extract_archive(archive, directory, _archive_limits())
    except ArchiveError as exc:
        raise JobSubmissionError("script", str(exc)) from None
    top_level = sorted({m.name.split("/", 1)[0] for m in members})
    for path in directory.rglob("*"):
        if SOURCE_DIR not in path.relative_to(directory).parts[:1]:
            _give_to_pool(path)
    return _StagedFiles(
        script_name=script_name,
        entry_arguments=entry_arguments,
        input_files=top_level,
        install_requirements="requirements.txt" in files,
        source={"kind": "archive", "archive": archive.name, "entry_command": entry_command},
        origin=f"Unpacked {archive.name} ({len(files)} files); runs {entry_command}",
    )


def _stage_files(
    directory: Path, *, spec: JobSpec, script, copy_from, requirements=None
) -> _StagedFiles:
    if requirements is not None and script is not None and is_archive(script.name or ""):
        raise JobSubmissionError(
            "requirements", "For a project, put requirements.txt at the top of the archive."
        )
    if copy_from is not None and copy_from.source.get("kind") == "archive":
        (directory / SOURCE_DIR).mkdir()
        original = copy_from.directory / SOURCE_DIR / copy_from.source["archive"]
        archive = directory / SOURCE_DIR / original.name
        # The first run could have replaced its folder's contents; copy only the real file.
        source = open_job_file(copy_from.directory, original)
        if source is None:
            raise JobSubmissionError("script", "The original project archive is gone; upload it.")
        with source, open(archive, "xb") as target:
            shutil.copyfileobj(source, target)
        staged = _stage_archive(directory, archive, spec.entry_command or "")
        return dataclasses.replace(staged, origin=f"Copied the project of “{copy_from.name}”")
    if copy_from is not None:
        script_name = copy_from.request["script_name"]
        source = open_job_file(copy_from.directory, copy_from.directory / script_name)
        if source is None:
            raise JobSubmissionError("script", "The original job's script is gone; upload it.")
        with source, open(directory / script_name, "xb") as target:
            shutil.copyfileobj(source, target)
        origin = f"Copied {script_name} from job “{copy_from.name}”"
        staged = _StagedFiles(script_name, [], [], False, {"kind": "script"}, origin)
        kept = open_job_file(copy_from.directory, copy_from.directory / SCRIPT_REQUIREMENTS)
        if copy_from.source.get("requirements") and kept is not None:
            with kept, open(directory / SCRIPT_REQUIREMENTS, "xb") as target:
                shutil.copyfileobj(kept, target)
            staged = _with_requirements(staged)
        elif kept is not None:
            kept.close()
        return staged
    if is_archive(script.name or ""):
        (directory / SOURCE_DIR).mkdir()
        archive = directory / SOURCE_DIR / safe_archive_name(script.name)
        _save_upload(script, archive)
        return _stage_archive(directory, archive, spec.entry_command or "")
    if not (script.name or "").lower().endswith(".py"):
        raise JobSubmissionError(
            "script", "Upload a Python script (.py) or a project archive (.zip, .tar.gz)."
        )
    if script.size is not None and script.size > settings.MAX_SCRIPT_MB * 1024 * 1024:
        raise JobSubmissionError(
            "script", f"The script is larger than {settings.MAX_SCRIPT_MB} MB."
        )
    script_name = safe_script_name(script.name)
    _save_upload(script, directory / script_name)
    staged = _StagedFiles(script_name, [], [], False, {"kind": "script"}, f"Uploaded {script_name}")
    if requirements is not None:
        if requirements.size is not None and requirements.size > MAX_REQUIREMENTS_BYTES:
            raise JobSubmissionError("requirements", "A requirements.txt this large is not one.")
        _save_upload(requirements, directory / SCRIPT_REQUIREMENTS)
        staged = _with_requirements(staged)
    return staged


def new_seed() -> int:
    """A job's NIGHTSHIFT_SEED: random, and kept so that the job can be reproduced."""
    return secrets.randbelow(2**31)


def content_hashes(directory: Path, staged: _StagedFiles) -> dict[str, str]:
    """SHA-256 of what the user gave: the script (and its requirements.txt) or the project
    archive, by their names in the job's folder."""
    if staged.source.get("kind") == "archive":
        names = [f"{SOURCE_DIR}/{staged.source['archive']}"]
    else:
        names = [staged.script_name]
        if staged.source.get("requirements"):
            names.append(SCRIPT_REQUIREMENTS)
    hashes = {}
    for name in names:
        digest = hashlib.sha256()
        with open(directory / name, "rb") as stream:
            for block in iter(lambda: stream.read(1024 * 1024), b""):
                digest.update(block)
        hashes[name] = digest.hexdigest()
    return hashes


def _with_requirements(staged: _StagedFiles) -> _StagedFiles:
    """A single script with its requirements.txt: both travel, and the launcher runs first."""
    return dataclasses.replace(
        staged,
        input_files=[staged.script_name, SCRIPT_REQUIREMENTS],
        install_requirements=True,
        source={**staged.source, "requirements": True},
        origin=f"{staged.origin} with {SCRIPT_REQUIREMENTS}",
    )


def safe_archive_name(uploaded_name: str) -> str:
    base = os.path.basename(uploaded_name.replace("\\", "/")).lower()
    suffix = next(s for s in ARCHIVE_SUFFIXES if base.endswith(s))
    stem = _SAFE_SCRIPT_CHARS.sub("_", base[: -len(suffix)]).strip("._-")[:80]
    return f"{stem or 'project'}{suffix}"


def check_may_submit(user, *, script, copy_from: Job | None) -> None:
    """An approved account, and files to run: an upload, or a job of the user's to copy; and
    a portal that is not drained for maintenance."""
    drain = drain_state()
    if drain.active:
        raise SubmissionsPaused("drain", drain.message)
    if not user_may_submit(user):
        raise AccountNotApproved(
            "account", "Your account waits for approval by a lab lead or an administrator; "
            "you can submit jobs once it is approved.",
        )  # fmt: skip
    if copy_from is not None and copy_from.owner_id != user.pk:
        raise JobSubmissionError("script", "That job is not yours to copy.")
    if copy_from is None and script is None:
        raise JobSubmissionError("script", "Choose a Python script or a project archive to upload.")


def job_submit(
    *,
    user,
    spec: JobSpec,
    script: UploadedFile | None = None,
    copy_from: Job | None = None,
    requirements: UploadedFile | None = None,
    check_pool: bool = True,
    parameters: dict | None = None,
    seed: int | None = None,
    reproduces: Job | None = None,
) -> Job:
    """Accept a job: store its files, record it, and queue its submission to HTCondor.

    The files are an uploaded script, an uploaded project archive (with spec's entry
    command), or those of `copy_from`, an earlier job of the same user (clone, re-run).
    A request that no workstation in the pool could ever run is refused with the
    reason; when the pool cannot be asked, the job is accepted and waits, and the job
    page explains it once the pool answers.
    """
    check_may_submit(user, script=script, copy_from=copy_from)
    request = job_validate_request(user=user, spec=spec)
    lab = lab_for_submission(user=user, lab_id=spec.lab_id)
    _check_quota(user, lab, spec)
    if check_pool:
        summary = _match_summary(request)
        if summary is not None and not summary.can_ever_run:
            raise JobSubmissionError(
                summary.blocking_field or "gpus",
                f"{summary.reason} Change the request so that a workstation can run it.",
            )

    job = Job(owner=user, name=spec.name.strip(), notify_by_email=spec.notify_by_email,
              lab=lab, gpus=spec.gpus, parameters=parameters or {},
              reproduces=reproduces)  # fmt: skip
    job.output_dir = str(settings.JOBS_DIR / str(job.public_id))
    directory = job.directory
    directory.mkdir(parents=True, exist_ok=False)
    try:
        staged = _stage_files(
            directory, spec=spec, script=script, copy_from=copy_from, requirements=requirements
        )
        job.source = {**staged.source, "sha256": content_hashes(directory, staged)}
        environment = dict(spec.environment)
        if parameters:
            environment[PARAMETERS_VARIABLE] = json.dumps(parameters)
        job.request = _request_fields(
            dataclasses.replace(spec, arguments=[*staged.entry_arguments, *spec.arguments],
                                environment=environment),
            script_name=staged.script_name, user=user,
            input_files=staged.input_files, install_requirements=staged.install_requirements,
            lab=lab, remove_after_s=_check_quota(user, lab, spec),
            seed=new_seed() if seed is None else seed,
        )  # fmt: skip
        try:
            _job_request(job)
        except InvalidJobRequest as exc:
            raise JobSubmissionError(exc.field, exc.message) from exc
        _install_helper(directory)
        with transaction.atomic():
            # Checked again with the quota locked: a racing submission may have used it.
            lock_quota(user, lab)
            _check_quota(user, lab, spec)
            job.save()
            _record(job, "created", staged.origin, actor=user)
            audit_record(action="job.submit", actor=user, target=job,
                         detail=f"{staged.origin}; lab {lab.name if lab else 'none'}")  # fmt: skip
            job_pk = job.pk
            transaction.on_commit(lambda: _enqueue_submit(job_pk))
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return job


_STAGING_TOKEN = re.compile(r"[0-9a-f]{32}")
STAGING_DIR = ".staging"
STAGING_MAX_AGE_S = 24 * 3600


def _staging_root(user) -> Path:
    return settings.JOBS_DIR / STAGING_DIR / str(int(user.pk))


def upload_stage(*, user, upload: UploadedFile) -> str:
    """Keep an upload across a form error, so the student need not choose it again."""
    token = uuid.uuid4().hex
    folder = _staging_root(user) / token
    folder.mkdir(parents=True)
    name = os.path.basename((upload.name or "upload").replace("\\", "/"))[:200] or "upload"
    try:
        _save_upload(upload, folder / name)
    except JobSubmissionError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return token


def upload_staged(*, user, token: str) -> File | None:
    """The upload kept under `token` for this user, or None (unknown, expired, not theirs)."""
    if not token or not _STAGING_TOKEN.fullmatch(token):
        return None
    folder = _staging_root(user) / token
    files = (
        [p for p in folder.iterdir() if p.is_file() and not p.is_symlink()]
        if folder.is_dir()
        else []
    )
    if len(files) != 1:
        return None
    return File(open(files[0], "rb"), name=files[0].name)  # noqa: SIM115 - closed by the caller


def upload_discard(*, user, token: str) -> None:
    if token and _STAGING_TOKEN.fullmatch(token):
        shutil.rmtree(_staging_root(user) / token, ignore_errors=True)


def uploads_clean_stale() -> int:
    """Remove uploads kept for forms that were never sent again."""
    root = settings.JOBS_DIR / STAGING_DIR
    cutoff = time.time() - STAGING_MAX_AGE_S
    removed = 0
    for folder in root.glob("*/*") if root.is_dir() else []:
        if folder.is_dir() and folder.stat().st_mtime < cutoff:
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


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
        lab_id=job.lab_id,
    )


def job_rerun(*, job: Job, user) -> Job:
    """The same job again, exactly: the same files, settings and seed (a sweep run's
    parameters included, as a job of its own). The new job records what it reproduces."""
    spec = job_spec_of(job)
    return job_submit(
        user=user, spec=dataclasses.replace(spec, name=_rerun_name(job.name)), copy_from=job,
        parameters=job.parameters or None, seed=job.seed, reproduces=job,
    )  # fmt: skip


def _rerun_name(name: str) -> str:
    suffix = " (re-run)"
    return name if name.endswith(suffix) else (name[: 200 - len(suffix)] + suffix)


def job_hold(*, job: Job, user) -> Job:
    """Pause a queued or running job in HTCondor until it is released."""
    return _act_on_job(
        job, user, "hold", allowed=(JobState.IDLE, JobState.RUNNING, JobState.SUSPENDED),
        refusal="Only a waiting or running job can be held.",
        reason=f"Held by {user.get_username()} from Nightshift", kind="hold requested",
        detail=f"Held by {user.get_username()}",
    )  # fmt: skip


def job_release(*, job: Job, user) -> Job:
    """Let a held job run again."""
    return _act_on_job(
        job, user, "release", allowed=(JobState.HELD,), refusal="Only a held job can be released.",
        reason="", kind="release requested", detail=f"Released by {user.get_username()}",
    )  # fmt: skip


def job_vacate(*, job: Job, user) -> Job:
    """Move a running job off its workstation, as its owner's return would: SIGTERM, time to
    checkpoint, then the next free workstation. For admins freeing a machine."""
    return _act_on_job(
        job, user, "vacate", allowed=(JobState.RUNNING,),
        refusal="Only a running job can be moved off its workstation.", reason="",
        kind="vacate requested",
        detail=f"Moved off {job.workstation or 'its workstation'} by {user.get_username()}",
    )  # fmt: skip


def _act_on_job(job, user, action, *, allowed, refusal, reason, kind, detail) -> Job:
    bridge = get_bridge()
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state not in allowed or not job.is_submitted:
            raise JobActionError(refusal)
        try:
            bridge.act(action, job.cluster_id, job.proc_id, reason=reason)
        except BridgeError as exc:
            raise JobActionError(f"HTCondor could not {action} the job: {exc}") from exc
        _record(job, kind, detail, actor=user)
        audit_record(action=f"job.{action}", actor=user, target=job, detail=detail)
    return job


def _enqueue_submit(job_pk: int) -> None:
    from .tasks import submit_job

    submit_job.delay(job_pk)


def job_submit_to_pool(job_pk: int) -> Job:
    """Hand a queued job to HTCondor, exactly once. Transient failures re-raise for retry.

    The attempt is committed before the schedd is contacted. A first attempt therefore
    knows nothing can be in the schedd yet and skips the lookup; any later attempt (after
    a crash, a killed worker or a redelivered task) looks the job up and adopts it.
    """
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_pk)
        if job.is_submitted or job.is_final:
            return job
        job.submit_attempts += 1
        job.submit_requested_at = timezone.now()
        job.save(update_fields=["submit_attempts", "submit_requested_at"])
        first_attempt = job.submit_attempts == 1

    bridge = get_bridge()
    transient_error = None
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_pk)
        if job.is_submitted or job.is_final:
            return job
        try:
            result = bridge.submit(
                _job_request(job), check_existing=not first_attempt, submitted_after=job.created_at
            )
        except BridgeError as exc:
            job.last_error = str(exc)
            if exc.transient:
                job.status_detail = "The scheduler is not answering; Nightshift keeps trying."
                job.save(update_fields=["last_error", "status_detail"])
                transient_error = exc
                metrics.submission_done(kind="job", outcome="retrying")
            else:
                _fail_before_submission(job, "HTCondor refused the job.", str(exc))
                metrics.submission_done(kind="job", outcome="refused")
                return job
        except InvalidJobRequest as exc:
            _fail_before_submission(job, "The job request is invalid.", str(exc))
            metrics.submission_done(kind="job", outcome="invalid")
            return job
        else:
            if settings.FAULT_PAUSE_AFTER_SUBMIT_S:
                time.sleep(settings.FAULT_PAUSE_AFTER_SUBMIT_S)
            job.cluster_id, job.proc_id = result.cluster_id, result.proc_id
            job.state, job.status_detail = JobState.IDLE, ""
            job.submitted_at = timezone.now()
            job.submit_description = description_text(bridge.description(_job_request(job)))
            job.save()
            how = "found already submitted" if result.adopted else "submitted"
            _record(job, "submitted", f"HTCondor job {job.condor_id} ({how})")
            metrics.submission_done(
                kind="job",
                outcome="submitted",
                waited_s=(job.submitted_at - job.created_at).total_seconds(),
            )
    if transient_error is not None:
        raise transient_error
    return job


def _fail_before_submission(job: Job, detail: str, error: str) -> None:
    job.state, job.finished_at = JobState.FAILED, timezone.now()
    job.outcome = JobOutcome.FAILED
    job.status_detail, job.last_error = detail, error
    job.save()
    _record(job, "rejected", error)


def _portal_state(observation: JobObservation) -> str:
    if observation.state is CondorState.COMPLETED:
        ok = observation.exit_code == 0 and observation.exit_signal is None
        return JobState.COMPLETED if ok else JobState.FAILED
    return JobState(observation.state.value)


@dataclass(frozen=True)
class _Timelines:
    """What the timelines of a batch of jobs already say, read in two queries for the batch."""

    ran: frozenset[int] = frozenset()
    cancel_requested: frozenset[int] = frozenset()
    latest_kind: dict[int, str] = field(default_factory=dict)

    @classmethod
    def of(cls, job_pks: list[int]) -> _Timelines:
        if not job_pks:
            return cls()
        kinds = set(
            JobEvent.objects.filter(
                job_id__in=job_pks, kind__in=("started", "resumed", "cancel requested")
            ).values_list("job_id", "kind")
        )
        latest = (
            JobEvent.objects.filter(job_id__in=job_pks)
            .order_by("job_id", "-at", "-id")
            .distinct("job_id")
            .values_list("job_id", "kind")
        )
        return cls(
            ran=frozenset(pk for pk, kind in kinds if kind != "cancel requested"),
            cancel_requested=frozenset(pk for pk, kind in kinds if kind == "cancel requested"),
            latest_kind=dict(latest),
        )


def _describe(
    job: Job, previous_state: str, observation: JobObservation, timelines: _Timelines
) -> tuple[str, str]:
    state = job.state
    if state == JobState.RUNNING:
        where = observation.workstation or "a workstation"
        if observation.gpu_model:
            where += f" ({observation.gpu_model})"
        return ("resumed" if job.pk in timelines.ran else "started"), f"Running on {where}"
    if state == JobState.IDLE and (previous_state == JobState.RUNNING or observation.evicted):
        where = observation.last_workstation or job.workstation
        source = f"{where} was reclaimed by its owner" if where else "The workstation was reclaimed"
        if timelines.latest_kind.get(job.pk) == "vacate requested":
            source = f"Moved off {where or 'its workstation'} by an administrator"
        checkpoint = checkpoint_of(job)
        if checkpoint is not None:
            saved = timezone.localtime(checkpoint.saved_at)
            resume = f"it will resume from its checkpoint of {saved:%H:%M:%S}"
        else:
            resume = "with no checkpoint, it will start again from the beginning"
        return "evicted", f"{source}; {resume} on the next free workstation."
    if state == JobState.HELD:
        return "held", observation.hold_reason or "Held by HTCondor."
    if state == JobState.COMPLETED:
        return "completed", "Exited with code 0."
    if state == JobState.FAILED:
        if observation.exit_signal is not None:
            return "failed", f"Killed by signal {observation.exit_signal}."
        return "failed", f"Exited with code {observation.exit_code}."
    if state == JobState.REMOVED:
        return "removed", observation.status_detail or "Removed from the queue."
    return state, observation.status_detail


def _observed_changes(
    job: Job, observation: JobObservation, *, cancel_requested: bool = False
) -> dict:
    """The fields of `job` that differ from what HTCondor reports.

    `cancel_requested` only decides the outcome of a removed job, which changes its state
    too: a caller that only asks whether anything differs can leave it out. Jobs that
    ended are never compared: HTCondor has nothing more to say about them.
    """
    new_state = _portal_state(observation)
    values = {
        "state": new_state,
        "status_detail": observation.status_detail,
        "hold_reason": observation.hold_reason,
        "hold_reason_code": observation.hold_reason_code,
        "hold_reason_subcode": observation.hold_reason_subcode,
        "num_starts": max(job.num_starts, observation.num_starts),
        "workstation": observation.workstation or job.workstation,
        "gpu_model": observation.gpu_model or job.gpu_model,
        "exit_code": observation.exit_code,
        "exit_signal": observation.exit_signal,
        "started_at": observation.started_at or job.started_at,
    }
    if new_state != JobState.IDLE:
        values["match_problem"] = values["wait_reason"] = ""
    if new_state in FINAL_STATES:
        values["finished_at"] = job.finished_at or observation.finished_at or timezone.now()
        values["outcome"] = _outcome(new_state, observation, cancel_requested)
    return {key: value for key, value in values.items() if getattr(job, key) != value}


def _outcome(state: str, observation: JobObservation, cancel_requested: bool) -> str:
    if state != JobState.REMOVED:
        return JobOutcome(state)
    if observation.removed_by_limit:
        return JobOutcome.RUNTIME_LIMIT
    if cancel_requested:
        return JobOutcome.CANCELLED
    return JobOutcome.REMOVED


def job_apply_observation(job_pk: int, observation: JobObservation) -> bool:
    """Bring one job (and its usage records) in line with what HTCondor reports.

    True when something changed.
    """
    return bool(jobs_apply_observations({job_pk: observation}))


# Jobs locked and written together: one transaction, and a few queries, per batch.
APPLY_BATCH = 1000


def jobs_apply_observations(observations: Mapping[int, JobObservation]) -> set[int]:
    """Bring jobs (and their usage records) in line with what HTCondor reports, keyed by
    job pk; returns the pks of those that changed.

    Each batch is one transaction under the jobs' row locks, so that overlapping syncs or a
    crash halfway never count a run twice or lose it. Rows, timeline events and usage
    records are written in bulk.
    """
    changed: set[int] = set()
    pks = sorted(observations)
    for start in range(0, len(pks), APPLY_BATCH):
        changed |= _apply_batch({pk: observations[pk] for pk in pks[start : start + APPLY_BATCH]})
    return changed


def _apply_batch(observations: Mapping[int, JobObservation]) -> set[int]:
    with transaction.atomic():
        jobs = list(
            Job.objects.select_for_update()
            .filter(pk__in=list(observations))
            .exclude(state__in=FINAL_STATES)
            .order_by("pk")
        )
        runs_changed = usage_record_observations((job, observations[job.pk]) for job in jobs)
        timelines = _Timelines.of([
            job.pk for job in jobs
            if _portal_state(observations[job.pk]) != job.state
            or observations[job.pk].num_starts > job.num_starts
        ])  # fmt: skip
        changed_jobs: list[Job] = []
        fields: set[str] = set()
        events: list[JobEvent] = []
        evicted: list[Job] = []
        for job in jobs:
            observation = observations[job.pk]
            changes = _observed_changes(
                job, observation, cancel_requested=job.pk in timelines.cancel_requested
            )
            if not changes:
                continue
            previous_state = job.state
            for key, value in changes.items():
                setattr(job, key, value)
            changed_jobs.append(job)
            fields.update(changes)
            if "state" in changes or "num_starts" in changes and job.state == JobState.IDLE:
                kind, detail = _describe(job, previous_state, observation, timelines)
                events.append(JobEvent(job=job, kind=kind, state=job.state, detail=detail))
                if kind == "evicted":
                    evicted.append(job)
            if job.state in (JobState.COMPLETED, JobState.FAILED):
                transaction.on_commit(functools.partial(_enqueue_collect, job.pk))
            if "state" in changes and job.state in NOTIFY_STATES and job.notify_by_email:
                transaction.on_commit(functools.partial(_enqueue_notify, job.pk, job.state))
        if changed_jobs:
            bulk_update_rows(Job, changed_jobs, sorted(fields))
        JobEvent.objects.bulk_create(events, batch_size=1000)
        log_job_events(events)
        for job in evicted:
            _hold_without_progress(job)
    return set(runs_changed) | {job.pk for job in changed_jobs}


NOTIFY_STATES = (JobState.COMPLETED, JobState.FAILED, JobState.HELD)


def _hold_without_progress(job: Job) -> None:
    """Hold a job evicted again and again without saving a checkpoint, instead of letting it
    start from zero for ever. Only where the portal sees the job's folder (shared mode): in
    spool mode its checkpoints are invisible here, and HTCondor's NIGHTSHIFT_MAX_STARTS
    guard applies alone."""
    limit = settings.MAX_EVICTIONS_WITHOUT_PROGRESS
    if not limit or settings.CONDOR_FILE_MODE != "shared":
        return
    streak = 0
    for run in job.usage_records.exclude(ended_at=None).order_by("-started_at")[:limit]:
        if run.ended_by != "evicted" or run.committed_s > 0:
            break
        streak += 1
    if streak < limit:
        return
    reason = f"Nightshift held it: evicted {streak} times in a row without saving a checkpoint."
    try:
        get_bridge().act("hold", job.cluster_id, job.proc_id, reason=reason,
                         reason_code=SUBCODE_NIGHTSHIFT_NO_PROGRESS)  # fmt: skip
    except BridgeError as exc:
        logger.warning("could not hold job %s after %s evictions: %s", job.pk, streak, exc)
        return
    _record(job, "hold requested", reason)
    audit_record(action="job.hold", actor=None, target=job, detail=reason)


def _enqueue_notify(job_pk: int, state: str) -> None:
    from .tasks import notify_job

    notify_job.delay(job_pk, state)


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
    _record(job, "email sent", f"Told {job.owner.email} the job is {label}")
    return True


def _enqueue_collect(job_pk: int) -> None:
    from .tasks import collect_outputs

    collect_outputs.delay(job_pk)


@dataclass
class SyncReport:
    active: int = 0
    changed: int = 0
    finished: int = 0
    resubmitted: int = 0
    seconds: float = 0.0


# What a sync compares; the rest of a job's row (its request above all) is not read, and
# rows are read as plain values: building 10,000 model instances would cost more than the
# comparison.
_SYNC_FIELDS = (
    "pk", "public_id", "state", "status_detail", "hold_reason", "hold_reason_code",
    "hold_reason_subcode", "num_starts", "workstation", "gpu_model", "exit_code", "exit_signal",
    "started_at", "finished_at", "match_problem", "wait_reason", "outcome",
)  # fmt: skip


def jobs_sync() -> SyncReport:
    """One sync cycle: one queue query, one history call, and only changed rows written."""
    started = time.perf_counter()
    try:
        report = _sync_cycle()
    except Exception:
        metrics.sync_done(seconds=time.perf_counter() - started, ok=False)
        raise
    report.seconds = time.perf_counter() - started
    metrics.sync_done(seconds=report.seconds, ok=True)
    return report


def _sync_cycle() -> SyncReport:
    bridge = get_bridge()
    report = SyncReport()
    active = [
        SimpleNamespace(**row)
        for row in Job.objects.filter(cluster_id__isnull=False)
        .exclude(state__in=FINAL_STATES)
        .values(*_SYNC_FIELDS)
    ]
    report.active = len(active)
    if active:
        observations = {o.job_id: o for o in bridge.active_jobs()}
        missing = [str(job.public_id) for job in active if str(job.public_id) not in observations]
        if missing:
            finished = {o.job_id: o for o in bridge.finished_jobs(missing)}
            report.finished = len(finished)
            observations.update(finished)
        runs = recorded_runs(job.pk for job in active)
        outdated = {}
        for job in active:
            observation = observations.get(str(job.public_id))
            # Compared in memory first: an unchanged job costs no lock and no write.
            if observation is not None and (
                _observed_changes(job, observation) or usage_outdated(runs.get(job.pk), observation)
            ):
                outdated[job.pk] = observation
        report.changed = len(jobs_apply_observations(outdated))
    _explain_unmatched_jobs(bridge)
    report.resubmitted = _resubmit_stale_jobs()
    uploads_clean_stale()
    return report


SEEN_REFRESH_S = 60


def pool_record_seen(machines) -> int:
    """Remember the workstations the pool reports (at most once a minute each)."""
    now = timezone.now()
    fresh = set(
        Workstation.objects.filter(
            last_seen_at__gte=now - timedelta(seconds=SEEN_REFRESH_S)
        ).values_list("name", flat=True)
    )
    rows = [
        Workstation(
            name=m.name,
            last_seen_at=now,
            total_gpus=m.total_gpus,
            gpu_name=m.gpu.name if m.gpu else "",
            gpu_memory_mb=m.gpu.memory_mb if m.gpu else 0,
            gpu_capability=m.gpu.capability if m.gpu else 0,
            total_cpus=m.total_cpus,
            total_memory_mb=m.total_memory_mb,
        )  # fmt: skip
        for m in machines
        if m.name not in fresh
    ]
    if rows:
        Workstation.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["name"],
            update_fields=["last_seen_at", "total_gpus", "gpu_name", "gpu_memory_mb",
                           "gpu_capability", "total_cpus", "total_memory_mb"],
        )  # fmt: skip
    return len(rows)


# Said on the page of an idle job that a free workstation could run, after more than
# POOL_STALL_AFTER_S of that: the negotiator is not matching (stopped, or unable to talk
# to the schedd). Fixed text, so that the metric can count the jobs that show it.
POOL_STALLED_REASON = (
    "The pool is not matching jobs to workstations: one that could run this job has been "
    "free for several scheduling cycles, yet the job waits. The administrators have been told."
)
# Since when each idle job has had a free matching workstation at every sync: {pk: time}.
FREE_MATCH_SINCE_KEY = "jobs:free-match-since"


def _explain_unmatched_jobs(bridge) -> None:
    """Tell each idle job why it waits. Jobs asking for the same thing (a sweep's runs) share
    one explanation, and jobs are updated one statement per distinct explanation. A job
    that waits while a workstation that fits it stays free means the pool is not matching."""
    machines = bridge.pool_machines()
    pool_record_seen(machines)
    idle = Job.objects.filter(state=JobState.IDLE).values_list(
        "pk", "public_id", "output_dir", "request", "match_problem", "wait_reason"
    )
    now = time.time()
    free_since: dict[str, float] = cache.get(FREE_MATCH_SINCE_KEY) or {}
    still_free: dict[str, float] = {}
    summaries: dict[str, MatchSummary] = {}
    to_update: dict[tuple[str, str], list[int]] = defaultdict(list)
    for pk, public_id, output_dir, request, match_problem, wait_reason in idle:
        key = json.dumps(request, sort_keys=True)
        if key not in summaries:
            job_request = _request_from_json(request, job_id=str(public_id), job_dir=output_dir)
            summaries[key] = summarize_matches(job_request, machines)
        summary = summaries[key]
        explained = (summary.reason, summary.busy_reason)
        if summary.machines_free_now:
            since = still_free[str(pk)] = free_since.get(str(pk), now)
            if now - since >= settings.POOL_STALL_AFTER_S:
                explained = ("", POOL_STALLED_REASON)
        if explained != (match_problem, wait_reason):
            to_update[explained].append(pk)
    cache.set(FREE_MATCH_SINCE_KEY, still_free, timeout=None)
    for (reason, busy_reason), pks in to_update.items():
        # Only jobs still idle: one that started meanwhile must not show a stale reason.
        Job.objects.filter(pk__in=pks, state=JobState.IDLE).update(
            match_problem=reason, wait_reason=busy_reason
        )
        if busy_reason == POOL_STALLED_REASON:
            logger.error(
                "the pool is not matching: %d more idle jobs have had a free matching "
                "workstation for over %d s (manage.py condor_doctor)",
                len(pks), settings.POOL_STALL_AFTER_S,
            )  # fmt: skip


def _resubmit_stale_jobs() -> int:
    """The database is the source of truth: a queued job whose task was lost is sent again.

    A job counts as lost when no submission task has touched it for RESUBMIT_AFTER_S: a
    task retrying against a scheduler that is down touches it at every attempt, so those
    are left alone instead of being sent again on every sync tick. Sweeps are sent whole.
    """
    now = timezone.now()
    cutoff = now - timedelta(seconds=settings.RESUBMIT_AFTER_S)
    silent = Q(submit_requested_at__lt=cutoff) | Q(
        submit_requested_at__isnull=True, created_at__lt=cutoff
    )
    with transaction.atomic():
        stale = list(
            Job.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(silent, state=JobState.QUEUED, cluster_id__isnull=True)
            # A sweep's runs go whole, below; a study's trials one by one, as jobs.
            .filter(Q(sweep__isnull=True) | Q(sweep__kind=Sweep.Kind.STUDY))
            .values_list("pk", flat=True)[:500]
        )
        Job.objects.filter(pk__in=stale).update(submit_requested_at=now)
        waiting = Job.objects.filter(sweep=OuterRef("pk"), state=JobState.QUEUED)
        stale_sweeps = list(
            Sweep.objects.select_for_update(skip_locked=True)
            .filter(silent, Exists(waiting), cluster_id__isnull=True)
            .exclude(kind=Sweep.Kind.STUDY)
            .values_list("pk", flat=True)[:100]
        )
        Sweep.objects.filter(pk__in=stale_sweeps).update(submit_requested_at=now)
    for job_pk in stale:
        _enqueue_submit(job_pk)
    if stale_sweeps:
        from .sweeps import _enqueue_sweep_submit

        for sweep_pk in stale_sweeps:
            _enqueue_sweep_submit(sweep_pk)
    return len(stale) + len(stale_sweeps)


def job_cancel(*, job: Job, user) -> Job:
    """Remove a job from the pool (or stop it before it gets there)."""
    bridge = get_bridge()
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.is_final:
            raise JobActionError(f"This job has already ended ({job.get_state_display()}).")
        if not job.is_submitted:
            job.state, job.finished_at = JobState.REMOVED, timezone.now()
            job.outcome = JobOutcome.CANCELLED
            job.status_detail = f"Cancelled by {user.get_username()} before it reached HTCondor."
            job.save()
            _record(job, "cancelled", job.status_detail, actor=user)
            audit_record(action="job.cancel", actor=user, target=job, detail=job.status_detail)
            return job
        try:
            bridge.act("remove", job.cluster_id, job.proc_id, reason=f"Cancelled by user {user.pk}")
        except BridgeError as exc:
            raise JobActionError(f"HTCondor could not remove the job: {exc}") from exc
        job.status_detail = "Cancelling…"
        job.save(update_fields=["status_detail"])
        _record(job, "cancel requested", f"Cancelled by {user.get_username()}", actor=user)
        audit_record(action="job.cancel", actor=user, target=job, detail="removal requested")
    return job


def job_collect_outputs(job_pk: int) -> Job:
    """Bring outputs home (spool mode) and mark them ready to download."""
    bridge = get_bridge()
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_pk)
        if job.outputs_ready or not job.is_submitted:
            return job
        bridge.retrieve(job.cluster_id, job.proc_id)
        job.outputs_collected_at = timezone.now()
        job.save(update_fields=["outputs_collected_at"])
        count = len(job_output_files(job))
        _record(job, "outputs", f"{count} output file{'s' if count != 1 else ''} ready")
    return job


def job_logs_for(job: Job) -> dict[str, Path]:
    """The job's logs by name: its own output, and pip's when it installs requirements."""
    return {
        "stdout": job.directory / STDOUT,
        "stderr": job.directory / STDERR,
        "install": job.directory / INSTALL_LOG,
    }


def job_metrics_path(job: Job) -> Path:
    return job.directory / METRICS_FILE
