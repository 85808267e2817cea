"""Read-only queries. Another user's job is simply not found."""

from __future__ import annotations

import io
import json
import os
import re
import stat
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import BinaryIO

from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.timesince import timesince

from condor_bridge import GpuModel, PoolMachine
from condor_bridge.submit import CHECKPOINT_DIR, HELPER_DIR
from labs.models import Lab, Membership
from plumbing.files import open_beneath, relative_to_root

from .models import Job, Workstation

LOG_CHUNK_BYTES = 256 * 1024


def job_list_for_user(user) -> QuerySet[Job]:
    """The user's own jobs."""
    return Job.objects.filter(owner=user).select_related("lab")


def visible_to(user, queryset: QuerySet) -> QuerySet:
    """Rows with an owner and a lab that a user may read: their own, those of the labs they
    lead, all for staff."""
    if user.is_staff:
        return queryset
    if not user.has_perm("labs.lead_lab"):
        return queryset.filter(owner=user)
    led = Membership.objects.filter(user=user, role=Membership.Role.LEAD).values("lab_id")
    return queryset.filter(Q(owner=user) | Q(lab__in=led))


def job_list_visible_to(user) -> QuerySet[Job]:
    """Every job a user may read: their own, those of the labs they lead, all for staff."""
    return visible_to(user, Job.objects.select_related("lab", "owner"))


# The start of a job's id, as `nightshift list` and the job pages show it (8 characters):
# at least 4 of them, in the id's own form.
JOB_ID_PREFIX = re.compile(r"[0-9a-f][0-9a-f-]{3,35}")
AMBIGUOUS_SHOWN = 5


class AmbiguousJobId(Exception):
    """The start of an id that more than one of the jobs the user may name begin with."""

    def __init__(self, prefix: str, matches: list[Job], more: bool) -> None:
        self.prefix = prefix
        self.matches = matches
        listed = ", ".join(f"{job.public_id.hex[:8]} ({job.name})" for job in matches)
        count = f"more than {len(matches)}" if more else str(len(matches))
        super().__init__(
            f"{prefix} is the start of {count} jobs' ids: {listed}. Give more of the id."
        )


def full_job_id(reference) -> uuid.UUID | None:
    """The job id `reference` names in full, or None when it is (at most) the start of one."""
    if isinstance(reference, uuid.UUID):
        return reference
    text = str(reference).strip()
    if len(text) < 32:
        return None
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def job_by_reference(jobs: QuerySet[Job], reference) -> Job:
    """One of `jobs` by its full id or by the start of it; Job.DoesNotExist when none is,
    AmbiguousJobId when several are."""
    full = full_job_id(reference)
    if full is not None:
        return jobs.get(public_id=full)
    prefix = str(reference).strip().lower()
    if not JOB_ID_PREFIX.fullmatch(prefix):
        raise Job.DoesNotExist
    matches = list(
        jobs.filter(public_id__startswith=prefix).order_by("-created_at")[: AMBIGUOUS_SHOWN + 1]
    )
    if not matches:
        raise Job.DoesNotExist
    if len(matches) > 1:
        raise AmbiguousJobId(prefix, matches[:AMBIGUOUS_SHOWN], more=len(matches) > AMBIGUOUS_SHOWN)
    return matches[0]


def job_get_visible(user, public_id) -> Job:
    """A job the user may read, by its id or the start of it; Job.DoesNotExist for any
    other, so it never leaks."""
    jobs = Job.objects.select_related("lab", "owner")
    if full_job_id(public_id) is None:
        return job_by_reference(visible_to(user, jobs), public_id)
    # Most reads are of one's own job (an open page polls it every two seconds): found
    # without first asking which roles and permissions the user has.
    own = jobs.filter(public_id=public_id, owner_id=user.pk).first()
    if own is not None:
        return own
    return visible_to(user, jobs).get(public_id=public_id)


def job_can_act(user, job: Job) -> bool:
    """Cancel, hold and release: the owner, or staff. A lab lead only reads."""
    return job.owner_id == user.pk or user.is_staff


def user_leads_a_lab(user) -> bool:
    return (
        user.has_perm("labs.lead_lab")
        and Membership.objects.filter(user=user, role=Membership.Role.LEAD).exists()
    )


@dataclass(frozen=True)
class Checkpoint:
    """What the job's helper last saved in its checkpoint folder."""

    saved_at: datetime
    size: int
    files: int

    @property
    def age(self) -> timedelta:
        return max(timezone.now() - self.saved_at, timedelta(0))


def checkpoint_of(job: Job) -> Checkpoint | None:
    """The job's current checkpoint (.nightshift/checkpoint), or None when it has none.

    Read from the job's folder, which the portal sees in the shared-file-system mode; in the
    spool mode the checkpoint lives with the schedd until the job ends.
    """
    folder = job.directory / CHECKPOINT_DIR
    base = job.directory.resolve()
    try:
        resolved = folder.resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError, RuntimeError, OSError):
        return None
    if base not in resolved.parents or folder.is_symlink() or not resolved.is_dir():
        return None
    size = files = 0
    newest = 0.0
    for path in resolved.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        info = path.stat()
        size += info.st_size
        files += 1
        newest = max(newest, info.st_mtime)
    if not files:
        return None
    return Checkpoint(datetime.fromtimestamp(newest, tz=UTC), size, files)


def job_get_for_user(user, public_id) -> Job:
    """The user's job, by its id or the start of it; Job.DoesNotExist for anyone else's, so
    its existence never leaks."""
    return job_by_reference(job_list_for_user(user), public_id)


@dataclass(frozen=True)
class OutputFile:
    path: str  # relative to the job's folder, with '/' separators, e.g. outputs/model.pt
    size: int


def open_job_file(root: Path, path: Path) -> BinaryIO | None:
    """Open a file the job may have written, only if it really lies inside `root`.

    The job runs as the pool's account and can replace any file in its folder, a log by a
    link to /etc/shadow say, and swap it back and forth while the portal reads; the portal
    reads as another user, so it follows no link at all below the job's folder (every
    component is opened without following, plumbing.files), nor opens anything but a
    regular file.
    """
    relative = relative_to_root(root, path)
    return open_beneath(root, relative) if relative is not None else None


def kept_paths(job: Job) -> list[str]:
    """The files and folders at the top of the job's folder that the student keeps."""
    return list(job.request.get("output_paths") or ["outputs"])


def _plain_file_size(path: Path) -> int | None:
    """The size of a regular file that is not a link, or None (also for one that a running
    job removed a moment ago)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def job_output_files(job: Job) -> list[OutputFile]:
    """Every kept file, with its size; links are never followed or listed. What a running
    job changes meanwhile may be listed or not; reading it (open_job_file) checks again."""
    files = []
    for name in kept_paths(job):
        top = job.directory / name
        size = _plain_file_size(top)
        if size is not None:
            files.append(OutputFile(name, size))
        elif top.is_dir() and not top.is_symlink():
            for dirpath, _dirnames, filenames in os.walk(top, followlinks=False):
                for filename in filenames:
                    path = Path(dirpath) / filename
                    size = _plain_file_size(path)
                    if size is not None:
                        relative = path.relative_to(job.directory).as_posix()
                        files.append(OutputFile(relative, size))
    return sorted(files, key=lambda f: f.path)


def job_output_path(job: Job, relative: str) -> Path | None:
    """The kept file named `relative`, only if it really lies inside a kept path."""
    if not relative or "\x00" in relative or relative.startswith("/"):
        return None
    parts = relative.split("/")
    if any(part in ("..", ".", "") for part in parts) or parts[0] not in kept_paths(job):
        return None
    root = job.directory.resolve()
    candidate = root
    for part in parts:
        candidate = candidate / part
        if candidate.is_symlink():
            return None
    if root not in candidate.resolve().parents or not candidate.is_file():
        return None
    return candidate


LOG_TAIL_BYTES = 64 * 1024


@dataclass(frozen=True)
class LogChunk:
    text: str
    start: int  # byte offset of text in the file
    offset: int  # where the next read starts
    size: int  # the file's size now


def job_log_chunk(
    root: Path, path: Path, offset: int = 0, limit: int = LOG_CHUNK_BYTES
) -> LogChunk:
    """Text from `offset` on, never more than `limit` bytes: logs are paged, never loaded whole.

    A negative offset asks for the tail (the last LOG_TAIL_BYTES), which is where a page
    that opens on a long-running job starts. A file shorter than `offset` was rewritten by
    a new run of the job (HTCondor truncates stdout when an evicted job starts again), so
    reading starts over.
    """
    stream = open_job_file(root, path)
    if stream is None:
        return LogChunk("", 0, 0, 0)
    with stream:
        size = os.fstat(stream.fileno()).st_size
        if offset < 0:
            offset = max(0, size - LOG_TAIL_BYTES)
        elif offset > size:
            offset = 0
        stream.seek(offset)
        data = stream.read(limit)
    return LogChunk(data.decode("utf-8", errors="replace"), offset, offset + len(data), size)


@dataclass(frozen=True)
class WorkstationView:
    machine: PoolMachine
    status: str  # free, nightshift, busy, owner, unlent, offline
    status_label: str
    nightshift_jobs: int
    terms_text: str = ""  # its owners' terms in words; "" where they set none


@dataclass(frozen=True)
class PoolOverview:
    workstations: list[WorkstationView]
    total_gpus: int
    free_gpus: int
    nightshift_gpus: int
    offline: int = 0
    error: str = ""


_STATUS_LABELS = {
    "free": "Free",
    "nightshift": "Running Nightshift jobs",
    "busy": "Busy with other work",
    "owner": "Owner is using it",
    "unlent": "Not lent now (its owners' terms)",
}


def terms_text(terms, lab_names: dict[str, str]) -> str:
    """A workstation's lending terms as the pool page says them: "to Vision only, at most
    1 GPU"."""
    said = []
    if terms.accounting_groups is not None:
        labs = [lab_names.get(group, group) for group in terms.accounting_groups]
        said.append(f"to {', '.join(labs)} only" if labs else "to no lab")
    if terms.gpus is not None:
        said.append(f"at most {terms.gpus} GPU{'s' if terms.gpus != 1 else ''}")
    if terms.memory_mb is not None:
        said.append(f"at most {terms.memory_mb / 1024:g} GB of memory")
    if terms.reclaim_by is not None:
        said.append("asked back by its owners")
    elif not terms.open:
        said.append("not now: outside its owners' hours, or paused")
    return ", ".join(said)


def pool_overview() -> PoolOverview:
    """Every workstation with its GPUs and whether it is free, ours, busy or its owner's."""
    from collections import Counter

    from condor_bridge import BridgeError

    from .bridge import get_bridge
    from .models import JobState

    try:
        machines = get_bridge().pool_machines()
    except BridgeError as exc:
        return PoolOverview([], 0, 0, 0, error=str(exc))
    running = Counter(
        Job.objects.filter(state=JobState.RUNNING).values_list("workstation", flat=True)
    )
    gpus_in_use = {
        name: sum(
            job.request.get("gpus") or 0
            for job in Job.objects.filter(state=JobState.RUNNING, workstation=name).only("request")
        )
        for name in running
    }
    lab_names = (
        dict(Lab.objects.values_list("accounting_group", "name"))
        if any(machine.terms.restricted for machine in machines)
        else {}
    )
    views = []
    for machine in machines:
        if running.get(machine.name) and machine.state != "Owner":
            status = "nightshift"
        elif not machine.terms.lent_now:
            status = "unlent"  # the kit shows it as Owner too: its terms, not its owner's use
        elif machine.state == "Owner":
            status = "owner"
        elif machine.free_cpus < machine.total_cpus or machine.free_gpus < machine.total_gpus:
            status = "busy"
        else:
            status = "free"
        views.append(
            WorkstationView(
                machine,
                status,
                _STATUS_LABELS[status],
                running.get(machine.name, 0),
                terms_text(machine.terms, lab_names),
            )
        )
    current = {m.name for m in machines}
    week_ago = timezone.now() - timedelta(days=7)
    for gone in Workstation.objects.exclude(name__in=current).filter(last_seen_at__gte=week_ago):
        machine = PoolMachine(
            name=gone.name,
            state="Offline",
            total_cpus=gone.total_cpus,
            free_cpus=0,
            total_memory_mb=gone.total_memory_mb,
            free_memory_mb=0,
            total_gpus=gone.total_gpus,
            free_gpus=0,
            gpu=GpuModel(gone.gpu_name, gone.gpu_memory_mb, gone.gpu_capability)
            if gone.gpu_name
            else None,
        )
        label = f"Offline (last seen {timesince(gone.last_seen_at)} ago)"
        views.append(WorkstationView(machine, "offline", label, 0))
    views.sort(key=lambda view: view.machine.name)
    return PoolOverview(
        workstations=views,
        total_gpus=sum(m.total_gpus for m in machines),
        offline=len(views) - len(machines),
        free_gpus=sum(m.free_gpus for m in machines if m.state != "Owner" and m.terms.lent_now),
        nightshift_gpus=sum(gpus_in_use.values()),
    )


MAX_METRIC_ROWS = 200_000


@dataclass(frozen=True)
class Metrics:
    names: list[str]  # in the order they first appeared
    rows: list[dict]  # {"step": int, "time": float | None, name: float | None, ...}
    skipped_lines: int = 0


def job_metrics(root: Path, path: Path) -> Metrics:
    """The job's metric rows (nightshift.log), one per step, skipping lines that are not rows.

    A job resumed from a checkpoint logs again the steps it had done after that checkpoint:
    a later row for a step updates the earlier one, so that every step shows once, with the
    values of the run that carried on (and two calls for one step with different metrics
    make one row).
    """
    names: dict[str, None] = {}
    by_step: dict[float, dict] = {}
    skipped = 0
    raw = open_job_file(root, path)
    if raw is None:
        return Metrics([], [])
    with io.TextIOWrapper(raw, encoding="utf-8", errors="replace") as stream:
        for line in stream:
            row = _metric_row(line)
            if row is None:
                skipped += line.strip() != ""
                continue
            if row["step"] not in by_step and len(by_step) >= MAX_METRIC_ROWS:
                skipped += 1
                continue
            for name in row:
                if name not in ("step", "time"):
                    names.setdefault(name)
            by_step.setdefault(row["step"], {}).update(row)
    rows = sorted(by_step.values(), key=lambda row: row["step"])
    return Metrics(list(names), rows, skipped)


def _metric_row(line: str) -> dict | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    step = data.get("step")
    if isinstance(step, bool) or not isinstance(step, int | float):
        return None
    row = {
        "step": step,
        "time": data.get("time") if isinstance(data.get("time"), int | float) else None,
    }
    for name, value in data.items():
        if name in ("step", "time") or not isinstance(name, str) or len(name) > 100:
            continue
        if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
            row[name] = value
    return row


def downsample(rows: list[dict], limit: int) -> list[dict]:
    """At most `limit` rows, evenly spaced, always keeping the last one."""
    if len(rows) <= limit:
        return rows
    stride = len(rows) / limit
    picked = [rows[int(i * stride)] for i in range(limit - 1)]
    return [*picked, rows[-1]]


PIP_FREEZE = f"{HELPER_DIR}/pip-freeze.txt"
MAX_FREEZE_BYTES = 256 * 1024


def job_pip_freeze(job: Job) -> list[str]:
    """The packages pip resolved for the job's requirements.txt, as the job recorded them."""
    raw = open_job_file(job.directory, job.directory / PIP_FREEZE)
    if raw is None:
        return []
    with raw:
        text = raw.read(MAX_FREEZE_BYTES).decode("utf-8", errors="replace")
    return [line for line in text.splitlines() if line.strip()]


def comparable_description(job: Job) -> str:
    """The submit description with what names this job (its id and folder) taken out."""
    return job.submit_description.replace(str(job.public_id), "<job id>").replace(
        job.output_dir, "<job folder>"
    )


@dataclass(frozen=True)
class Reproduction:
    original: Job
    same: list[str]  # what matches, in words
    differences: list[tuple[str, str, str]]  # (what, the original's, this job's)


def reproduction_of(job: Job) -> Reproduction | None:
    """How a job compares with the job it reproduces: files, seed, settings, submit
    description, packages, and where it ran."""
    original = job.reproduces
    if original is None:
        return None
    same, differences = [], []

    def compare(what: str, before, after, show=str) -> None:
        if before == after:
            same.append(what)
        else:
            differences.append((what, show(before), show(after)))

    compare(
        "files (SHA-256)",
        original.source.get("sha256"),
        job.source.get("sha256"),
        show=lambda hashes: ", ".join(f"{n} {h[:12]}" for n, h in (hashes or {}).items()),
    )
    compare("seed", original.seed, job.seed)
    ignored = ("seed",)
    compare(
        "settings",
        {k: v for k, v in original.request.items() if k not in ignored},
        {k: v for k, v in job.request.items() if k not in ignored},
        show=lambda request: json.dumps(request, sort_keys=True)[:300],
    )
    if original.submit_description and job.submit_description:
        compare(
            "submit description",
            comparable_description(original),
            comparable_description(job),
            show=lambda text: f"{len(text)} characters",
        )
    before, after = set(job_pip_freeze(original)), set(job_pip_freeze(job))
    if before or after:
        compare(
            "packages (pip freeze)",
            before,
            after,
            show=lambda packages: ", ".join(sorted(packages - (before & after))) or "-",
        )
    if original.workstation and job.workstation:
        compare("workstation", original.workstation, job.workstation)
    if original.gpu_model or job.gpu_model:
        compare("GPU model", original.gpu_model or "none", job.gpu_model or "none")
    return Reproduction(original, same, differences)
