"""A job's folder: uploads and archives put in place, the helper files, content hashes,
and uploads kept across a form error."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import secrets
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.uploadedfile import UploadedFile

from condor_bridge.submit import (
    DATA_PLUGIN,
    HELPER_DIR,
    INSTALL_LOG,
    METRICS_FILE,
    STDERR,
    STDOUT,
)

from .archives import (
    ARCHIVE_SUFFIXES,
    ArchiveError,
    ArchiveLimits,
    check_archive,
    extract_archive,
    is_archive,
)
from .inputs import (
    DATASETS_FOLDER,
    DATASETS_MANIFEST,
    MODELS_FOLDER,
    data_install,
    data_prepare,
    model_prepare,
)
from .models import Job
from .selectors import open_job_file
from .software import ENVIRONMENT_FILE, LOCK_FILE, software_install, software_prepare
from .specs import OUTPUTS, JobSpec, JobSubmissionError, parse_entry_command

HELPER_MODULE = Path(__file__).resolve().parent / "runtime" / "nightshift.py"

LAUNCHER_MODULE = Path(__file__).resolve().parent / "runtime" / "launch.py"
# The launcher's dataset delivery, and HTCondor's file-transfer plugin that runs it.
DATA_MODULE = LAUNCHER_MODULE.with_name("nightshift_data.py")
DATA_PLUGIN_MODULE = LAUNCHER_MODULE.with_name("dataset_plugin.py")

# What every job's helper folder holds: the module jobs import, the launcher, and the
# launcher's dataset delivery.
HELPER_FILES = (
    (HELPER_MODULE, "nightshift.py"),
    (LAUNCHER_MODULE, "launch.py"),
    (DATA_MODULE, "nightshift_data.py"),
    (LAUNCHER_MODULE.with_name("environment_cache.py"), "environment_cache.py"),
    (LAUNCHER_MODULE.with_name("cache_keeper.py"), "cache_keeper.py"),
)


# Where a project's original archive is kept, for clone and re-run. Never sent to the pool.
SOURCE_DIR = ".source"


# A single script's optional requirements file, installed before it runs.
SCRIPT_REQUIREMENTS = "requirements.txt"


MAX_REQUIREMENTS_BYTES = 1024 * 1024


# Inside the helper folder, kept by the portal (not given to the pool): where it leaves
# requests for the running job, such as a study's request to stop a pruned trial.
CONTROL_DIR = "control"


_SAFE_SCRIPT_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_script_name(uploaded_name: str) -> str:
    """A file name HTCondor and the shell take literally, keeping what the user called it."""
    base = os.path.basename(uploaded_name.replace("\\", "/"))
    stem = base[:-3] if base.lower().endswith(".py") else base
    stem = _SAFE_SCRIPT_CHARS.sub("_", stem).strip("._-")[:80]
    return f"{stem or 'train'}.py"


def install_helper(
    directory: Path,
    *,
    link_from: Path | None = None,
    software: dict | None = None,
    datasets: list[dict] | None = None,
) -> None:
    """The outputs folder and the job helper, in a job's folder that the pool may write.

    `link_from`, another job's folder with the helper installed, has its helper files
    hard-linked instead of copied (a sweep's runs): they are the portal's, read-only.
    `software` (StagedFiles.software) adds the lock the launcher installs, and `datasets`
    (StagedFiles.datasets) the datasets it puts in place, with the job's credential.
    """
    if link_from is not None:
        install_helpers_linked(link_from, [directory])
        return
    (directory / OUTPUTS).mkdir(exist_ok=True)
    helper = directory / HELPER_DIR
    helper.mkdir()
    # The portal's to write, the job's to read: how a study asks a trial to stop.
    (helper / CONTROL_DIR).mkdir(mode=0o755)
    for module, name in HELPER_FILES:
        shutil.copyfile(module, helper / name)
    software_install(directory, software)
    if data_install(directory, datasets):
        # HTCondor's file-transfer plugin for the job's datasets, where HTCondor moves its
        # files (spool mode); it runs the launcher's delivery module beside it.
        plugin = directory / DATA_PLUGIN
        shutil.copyfile(DATA_PLUGIN_MODULE, plugin)
        plugin.chmod(0o755)  # noqa: S103 - HTCondor runs it as the job, read-only for all
    for path in (directory, directory / OUTPUTS, helper):
        give_to_pool(path)


def install_helpers_linked(first: Path, directories: list[Path]) -> None:
    """install_helper in many jobs' folders (a sweep's runs) from `first`'s, whose files they
    share by hard links; what `first` holds is looked up once, not for each. A sweep of ten
    thousand runs spends its time in these file system calls."""
    source = os.fspath(first / HELPER_DIR)
    shared = [name for _, name in HELPER_FILES]
    shared += [
        name for name in (LOCK_FILE, ENVIRONMENT_FILE) if os.path.isfile(os.path.join(source, name))
    ]
    has_datasets = os.path.isfile(os.path.join(source, DATASETS_MANIFEST))
    uid = settings.JOB_DIR_UID
    for directory in directories:
        folder = os.fspath(directory)
        outputs, helper = os.path.join(folder, OUTPUTS), os.path.join(folder, HELPER_DIR)
        # One call (makedirs asks first): a project may have brought its own outputs folder.
        with contextlib.suppress(FileExistsError):
            os.mkdir(outputs)
        os.mkdir(helper)
        os.mkdir(os.path.join(helper, CONTROL_DIR), 0o755)
        for name in shared:
            link_or_copy(os.path.join(source, name), os.path.join(helper, name))
        if has_datasets:
            data_install(directory, None, link_from=first)
            try:
                os.link(first / DATA_PLUGIN, directory / DATA_PLUGIN)
            except OSError:
                shutil.copyfile(DATA_PLUGIN_MODULE, directory / DATA_PLUGIN)
                os.chmod(directory / DATA_PLUGIN, 0o755)  # noqa: S103 - as install_helper
        if uid is not None:
            for path in (folder, outputs, helper):
                os.chown(path, uid, -1)


def link_or_copy(source: str | Path, target: str | Path) -> None:
    """A hard link to a file many jobs' folders share; a copy where the two folders are on
    different file systems, where no link can be made."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


LIVE_SECRET = f"{HELPER_DIR}/live-secret"


def live_secret_install(directory: Path) -> str:
    """A notebook session's Jupyter token, readable by the job alone; returns it."""
    secret = secrets.token_urlsafe(32)
    path = directory / LIVE_SECRET
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as stream:
        stream.write(secret + "\n")
    give_to_pool(path)
    return secret


def give_to_pool(path: Path) -> None:
    if settings.JOB_DIR_UID is not None:
        os.chown(path, settings.JOB_DIR_UID, -1)


@dataclass(frozen=True)
class StagedFiles:
    """What a job's folder holds once its upload (or copy) is in place."""

    script_name: str
    entry_arguments: list[str]
    input_files: list[str]
    install_requirements: bool
    source: dict
    origin: str
    # The software it runs with (jobs.software.PreparedSoftware as a dict), if prepared.
    software: dict | None = None
    # The datasets and models it reads (jobs.inputs records), which the launcher puts in place.
    datasets: list[dict] | None = None


def archive_limits() -> ArchiveLimits:
    return ArchiveLimits(
        max_files=settings.ARCHIVE_MAX_FILES,
        max_expanded_bytes=settings.ARCHIVE_MAX_EXPANDED_MB * 1024 * 1024,
    )


def save_upload(upload: UploadedFile, target: Path) -> None:
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


def _stage_archive(directory: Path, archive: Path, entry_command: str) -> StagedFiles:
    script_name, entry_arguments = parse_entry_command(entry_command)
    try:
        members = check_archive(archive, archive_limits())
        files = {m.name for m in members if not m.is_dir}
        if script_name not in files:
            raise JobSubmissionError(
                "entry_command",
                f"The archive has no {script_name}; it has "
                f"{', '.join(sorted(f for f in files if f.endswith('.py'))[:5]) or 'no .py file'}.",
            )
        extract_archive(archive, directory, archive_limits())
    except ArchiveError as exc:
        raise JobSubmissionError("script", str(exc)) from None
    top_level = sorted({m.name.split("/", 1)[0] for m in members})
    for path in directory.rglob("*"):
        if SOURCE_DIR not in path.relative_to(directory).parts[:1]:
            give_to_pool(path)
    return StagedFiles(
        script_name=script_name,
        entry_arguments=entry_arguments,
        input_files=top_level,
        install_requirements="requirements.txt" in files,
        source={"kind": "archive", "archive": archive.name, "entry_command": entry_command},
        origin=f"Unpacked {archive.name} ({len(files)} files); runs {entry_command}",
    )


def stage_files(
    directory: Path, *, spec: JobSpec, script, copy_from, requirements=None, user=None
) -> StagedFiles:
    """Put the job's files in `directory`; with `user`, also prepare its software: the
    environment it names, or a lock made from its requirements.txt."""
    staged = _stage_user_files(
        directory, spec=spec, script=script, copy_from=copy_from, requirements=requirements
    )
    if user is None:
        return staged
    prepared = software_prepare(
        user=user,
        spec=spec,
        directory=directory,
        has_requirements_file=staged.install_requirements,
    )
    if prepared is not None:
        staged = dataclasses.replace(
            staged,
            install_requirements=staged.install_requirements or prepared.lock is not None,
            source={**staged.source, "environment": prepared.record}
            if prepared.record
            else staged.source,
            software=dataclasses.asdict(prepared),
        )
    datasets = data_prepare(user=user, references=list(spec.datasets))
    models = model_prepare(user=user, references=list(spec.models))
    if not datasets and not models:
        return staged
    for field, folder, records in (
        ("datasets", DATASETS_FOLDER, datasets),
        ("models", MODELS_FOLDER, models),
    ):
        for record in records:
            if os.path.lexists(directory / folder / record["name"]):
                raise JobSubmissionError(
                    field,
                    f"The project has its own {folder}/{record['name']}, where the "
                    f"{field[:-1]} {record['name']} goes: rename that folder.",
                )
    source = dict(staged.source)
    if datasets:
        source["datasets"] = datasets
    if models:
        source["models"] = models
    # The launcher puts datasets and models in place, so it runs even with nothing to
    # install; it fetches both alike.
    return dataclasses.replace(
        staged, install_requirements=True, datasets=datasets + models, source=source
    )


def _stage_user_files(
    directory: Path, *, spec: JobSpec, script, copy_from, requirements=None
) -> StagedFiles:
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
        staged = StagedFiles(script_name, [], [], False, {"kind": "script"}, origin)
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
        save_upload(script, archive)
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
    save_upload(script, directory / script_name)
    staged = StagedFiles(script_name, [], [], False, {"kind": "script"}, f"Uploaded {script_name}")
    if requirements is not None:
        if requirements.size is not None and requirements.size > MAX_REQUIREMENTS_BYTES:
            raise JobSubmissionError("requirements", "A requirements.txt this large is not one.")
        save_upload(requirements, directory / SCRIPT_REQUIREMENTS)
        staged = _with_requirements(staged)
    return staged


def content_hashes(directory: Path, staged: StagedFiles) -> dict[str, str]:
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


def _with_requirements(staged: StagedFiles) -> StagedFiles:
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
        save_upload(upload, folder / name)
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


def job_logs_for(job: Job) -> dict[str, Path]:
    """The job's logs by name: its own output, and pip's when it installs requirements."""
    return {
        "stdout": job.directory / STDOUT,
        "stderr": job.directory / STDERR,
        "install": job.directory / INSTALL_LOG,
    }


def job_metrics_path(job: Job) -> Path:
    return job.directory / METRICS_FILE
