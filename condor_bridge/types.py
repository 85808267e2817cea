"""Typed values that cross the boundary between Nightshift and HTCondor."""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

MAX_GPUS = 8
MAX_GPU_MEMORY_GB = 1024
MAX_CPUS = 128
MAX_MEMORY_MB = 1024 * 1024
MAX_DISK_MB = 10 * 1024 * 1024
MIN_RUNTIME_S = 60
MAX_RUNTIME_S = 30 * 24 * 3600
# Deadlines between 2020 and 2100: their job priorities (condor_bridge.submit) stay positive
# and within a 32-bit integer.
EARLIEST_DEADLINE_S = 1_577_836_800
LATEST_DEADLINE_S = 4_102_444_800
MAX_ARGUMENTS = 200
MAX_TEXT_LENGTH = 4096

JOB_ID_PATTERN = _JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
# A schedd's Name in the collector (ap1.campus.edu, second@ap1.campus.edu): it reaches a
# ClassAd constraint and condor_ssh_to_job's -name, so nothing else is let through.
SCHEDD_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,199}")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_SCRIPT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}\.py$")
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./:@+-]{0,499}")
# A file or folder at the top of the job folder, listed in transfer_input_files.
_INPUT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=@-]{0,99}")
_ACCOUNTING_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_OUTPUT_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
# nightshift://HOST[:PORT]/SHA256: nothing that could end an item of transfer_input_files.
_DATASET_URL = re.compile(
    r"nightshift://(?:[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?/[0-9a-f]{64}"
)
MAX_DATASET_URLS = 8
# "notebook": the job is a JupyterLab session (it runs nightshift.run_notebook()).
LIVE_SERVICES = ("tensorboard", "serve", "notebook")
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


class JobState(enum.StrEnum):
    """What HTCondor says a job is doing, in Nightshift's words."""

    IDLE = "idle"
    RUNNING = "running"
    HELD = "held"
    COMPLETED = "completed"
    REMOVED = "removed"
    TRANSFERRING = "transferring"
    SUSPENDED = "suspended"


class FileMode(enum.StrEnum):
    """How job files reach the execute machine."""

    SHARED = "shared"  # the access point sees the portal's job folder
    SPOOL = "spool"  # files are spooled to the schedd and retrieved afterwards


class BridgeError(Exception):
    """Any failure talking to HTCondor. `transient` says whether a retry can help."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


class InvalidJobRequest(ValueError):
    """A job request that HTCondor must never see. `field` names the offending input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def check_text(field_name: str, value: str, *, max_length: int = MAX_TEXT_LENGTH) -> None:
    if not isinstance(value, str):
        raise InvalidJobRequest(field_name, "must be text")
    if _CONTROL_CHARS.search(value):
        raise InvalidJobRequest(
            field_name, "must not contain line breaks, tabs, NUL or other control characters"
        )
    if len(value) > max_length:
        raise InvalidJobRequest(field_name, f"must be at most {max_length} characters")


def _check_int(field_name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJobRequest(field_name, "must be a whole number")
    if not low <= value <= high:
        raise InvalidJobRequest(field_name, f"must be between {low} and {high}")


def _check_number(field_name: str, value: float, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidJobRequest(field_name, "must be a number")
    if not low <= value <= high:
        raise InvalidJobRequest(field_name, f"must be between {low:g} and {high:g}")


def _check_project_path(field_name: str, path: str) -> None:
    """A relative .py path inside a project, e.g. src/train.py."""
    check_text(field_name, path, max_length=500)
    parts = path.split("/")
    if path.startswith("/") or ".." in parts or "" in parts or "\\" in path:
        raise InvalidJobRequest(field_name, "must be a relative path inside the project")
    if not path.endswith(".py"):
        raise InvalidJobRequest(field_name, "must name a Python file (.py)")


@dataclass(frozen=True)
class JobRequest:
    """Everything HTCondor needs to run one training script. Validated on creation."""

    job_id: str
    job_dir: str
    script_name: str
    arguments: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    gpus: int = 0
    gpu_memory_gb: float | None = None
    gpu_capability: float | None = None
    cpus: int = 1
    memory_mb: int = 2048
    disk_mb: int = 4096
    max_runtime_s: int | None = None
    # When the user wants it finished (Unix seconds): the job goes ahead of their others with
    # later deadlines or none (HTCondor's job priority; condor_bridge.submit).
    finish_by_s: int | None = None
    # A limit the user did not choose (their lab's quota): HTCondor removes the job past it.
    remove_after_s: int | None = None
    output_paths: tuple[str, ...] = ("outputs",)
    # A project: its top-level files and folders (spooled in spool mode). Empty for a script.
    input_files: tuple[str, ...] = ()
    # Install the project's requirements.txt into a virtual environment before running.
    install_requirements: bool = False
    # Run in HTCondor's container universe with this image (None: a plain vanilla job).
    container_image: str | None = None
    accounting_group: str = "nightshift"
    accounting_user: str | None = None
    python: str = "/usr/bin/python3"
    # How long a job has between SIGTERM (its workstation's owner is back) and SIGKILL, to
    # checkpoint: match the execute nodes' NIGHTSHIFT_VACATE_GRACE_SECONDS.
    vacate_grace_s: int = 300
    # The helper checkpoints this often without being asked (0: only on SIGTERM).
    checkpoint_interval_s: int = 0
    # Held, with an explanation, once it has started this many times (evicted again and
    # again) instead of looping for ever; None for no limit.
    max_starts: int | None = 10
    # How long the schedd keeps trying to reconnect to a running job it lost touch with (a
    # restart of the access point or the workstation) before running it again elsewhere;
    # None: HTCondor's default (2400 s).
    job_lease_s: int | None = None
    # Given to the job as NIGHTSHIFT_SEED, for scripts that seed their random generators
    # with it: a reproduction runs with the same seed.
    seed: int | None = None
    # The dataset versions HTCondor's file transfer brings (spool mode), as
    # nightshift://PORTAL/SHA256 URLs; without a transfer (shared mode) the launcher does.
    dataset_urls: tuple[str, ...] = ()
    # Web services the launcher starts beside the job (or gives it a port for), which the
    # portal's live proxy reaches through condor_ssh_to_job: see condor_bridge.live.
    live_services: tuple[str, ...] = ()
    # A notebook session's own limits: it ends itself after this long running (its files
    # are kept), and after this long without activity; None: no limit.
    session_limit_s: int | None = None
    session_idle_s: int | None = None

    def __post_init__(self) -> None:
        if not _JOB_ID.fullmatch(str(self.job_id)):
            raise InvalidJobRequest("job_id", "must be letters, digits and dashes")
        if self.container_image is not None:
            check_text("container_image", self.container_image, max_length=500)
            if not _IMAGE.fullmatch(self.container_image):
                raise InvalidJobRequest(
                    "container_image", "must be an image name or path without spaces, quotes or $"
                )
        for name, path in (("job_dir", self.job_dir), ("python", self.python)):
            check_text(name, path)
            if not path.startswith("/") or "$" in path or '"' in path or "'" in path:
                raise InvalidJobRequest(name, "must be an absolute path without quotes or $")
        if self.input_files:
            _check_project_path("script_name", self.script_name)
            for name in self.input_files:
                if not _INPUT_NAME.fullmatch(name):
                    raise InvalidJobRequest("input_files", f"{name!r} is not a plain name")
        elif not _SCRIPT_NAME.fullmatch(self.script_name):
            raise InvalidJobRequest(
                "script_name", "must be a .py file name of letters, digits, '.', '_' and '-'"
            )
        if len(self.arguments) > MAX_ARGUMENTS:
            raise InvalidJobRequest("arguments", f"at most {MAX_ARGUMENTS} arguments")
        for argument in self.arguments:
            check_text("arguments", argument)
        for key, value in self.environment:
            if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
                raise InvalidJobRequest(
                    "environment", f"{key!r} is not a valid variable name (letters, digits, _)"
                )
            check_text("environment", value)
        _check_int("gpus", self.gpus, 0, MAX_GPUS)
        if self.gpu_memory_gb is not None:
            _check_number("gpu_memory_gb", self.gpu_memory_gb, 0.1, MAX_GPU_MEMORY_GB)
        if self.gpu_capability is not None:
            _check_number("gpu_capability", self.gpu_capability, 1.0, 20.0)
        if self.gpus == 0 and (self.gpu_memory_gb is not None or self.gpu_capability is not None):
            raise InvalidJobRequest(
                "gpus", "GPU memory or capability needs at least 1 GPU to be requested"
            )
        _check_int("cpus", self.cpus, 1, MAX_CPUS)
        _check_int("memory_mb", self.memory_mb, 128, MAX_MEMORY_MB)
        _check_int("disk_mb", self.disk_mb, 16, MAX_DISK_MB)
        if self.max_runtime_s is not None:
            _check_int("max_runtime_s", self.max_runtime_s, MIN_RUNTIME_S, MAX_RUNTIME_S)
        if self.finish_by_s is not None:
            _check_int("finish_by_s", self.finish_by_s, EARLIEST_DEADLINE_S, LATEST_DEADLINE_S)
        if self.remove_after_s is not None:
            _check_int("remove_after_s", self.remove_after_s, MIN_RUNTIME_S, MAX_RUNTIME_S)
        _check_int("vacate_grace_s", self.vacate_grace_s, 1, 24 * 3600)
        _check_int("checkpoint_interval_s", self.checkpoint_interval_s, 0, MAX_RUNTIME_S)
        if self.job_lease_s is not None:
            _check_int("job_lease_s", self.job_lease_s, 20, 7 * 24 * 3600)
        if self.max_starts is not None:
            _check_int("max_starts", self.max_starts, 1, 1000)
        if self.seed is not None:
            _check_int("seed", self.seed, 0, 2**31 - 1)
        if len(self.dataset_urls) > MAX_DATASET_URLS:
            raise InvalidJobRequest("dataset_urls", f"at most {MAX_DATASET_URLS} datasets")
        for url in self.dataset_urls:
            if not isinstance(url, str) or not _DATASET_URL.fullmatch(url):
                raise InvalidJobRequest(
                    "dataset_urls", f"{url!r} is not a nightshift://PORTAL/SHA256 URL"
                )
        for service in self.live_services:
            if service not in LIVE_SERVICES:
                raise InvalidJobRequest(
                    "live_services", f"{service!r} is not one of {', '.join(LIVE_SERVICES)}"
                )
        if len(set(self.live_services)) != len(self.live_services):
            raise InvalidJobRequest("live_services", "names a service twice")
        if "notebook" in self.live_services and "serve" in self.live_services:
            raise InvalidJobRequest("live_services", "a notebook session cannot also serve")
        for name in ("session_limit_s", "session_idle_s"):
            value = getattr(self, name)
            if value is not None:
                _check_int(name, value, MIN_RUNTIME_S, MAX_RUNTIME_S)
        for path in self.output_paths:
            if not _OUTPUT_PATH.fullmatch(path) or path in (".", ".."):
                raise InvalidJobRequest("output_paths", f"{path!r} is not a plain file name")
        for name, value in (
            ("accounting_group", self.accounting_group),
            ("accounting_user", self.accounting_user),
        ):
            if value is not None and not _ACCOUNTING_NAME.fullmatch(value):
                raise InvalidJobRequest(name, "must be letters, digits, '_' and '-'")


@dataclass(frozen=True)
class SubmitResult:
    cluster_id: int
    proc_id: int
    adopted: bool  # True when an earlier attempt had already submitted this job


@dataclass(frozen=True)
class JobObservation:
    """One job as HTCondor reports it, from the queue or from the history."""

    job_id: str
    cluster_id: int
    proc_id: int
    state: JobState
    in_queue: bool
    status_detail: str = ""
    exit_code: int | None = None
    exit_signal: int | None = None
    hold_reason: str = ""
    hold_reason_code: int | None = None
    hold_reason_subcode: int | None = None
    num_starts: int = 0
    workstation: str = ""
    gpu_model: str = ""
    entered_state_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    # HTCondor's own accounting, cumulative over every run so far (RemoteWallClockTime,
    # CommittedTime): usage records are the differences between successive observations.
    wall_time_s: float = 0.0
    committed_time_s: float = 0.0
    # When the run now in progress began (JobCurrentStartDate); None unless it runs and its
    # job has begun executing (a claim that was never activated is no run).
    run_started_at: datetime | None = None
    # Held by the schedd until a spooling submitter sends its input files (hold code 16): a
    # submitter that stopped between its submit and its spool leaves the job so for good.
    awaiting_input: bool = False
    # The latest run that ended: where it ran, and when it was evicted (LastVacateTime).
    last_workstation: str = ""
    # The pool `workstation` and `last_workstation` are in when it is not the home pool (a
    # flocked run): its central manager, as HTCondor names it (RemotePool, LastRemotePool).
    pool: str = ""
    last_pool: str = ""
    last_vacated_at: datetime | None = None
    gpus_assigned: int = 0
    removed_by_limit: bool = False
    # A held job's peak memory and its disk, in MB (None unless held): what it reached when
    # HTCondor stopped it for exceeding its request.
    held_memory_mb: int | None = None
    held_disk_mb: int | None = None

    @property
    def evicted(self) -> bool:
        """Back in the queue after having run: its workstation was reclaimed."""
        return self.state is JobState.IDLE and self.num_starts > 0


@dataclass(frozen=True)
class JobUsage:
    """What one job uses, as HTCondor measures it (a queue or history ad): the job's own
    figures beside what it asked for. None: HTCondor has not measured it (a pool whose
    startds do not monitor GPUs reports no GPU figures at all)."""

    job_id: str
    state: JobState
    in_queue: bool
    workstation: str = ""
    num_starts: int = 0
    # When the run now in progress began (JobCurrentStartDate); None unless it runs.
    run_started_at: datetime | None = None
    cpus_requested: int = 0
    memory_requested_mb: int = 0
    disk_requested_mb: int = 0
    gpus_requested: int = 0
    # CpusUsage: how many cores the run kept fully busy, on average.
    cpus_used: float | None = None
    # ResidentSetSize (now) and MemoryUsage (the peak that HTCondor's policy compares with
    # request_memory), in MB.
    memory_mb: float | None = None
    memory_peak_mb: float | None = None
    # DiskUsage: the job's scratch directory, in MB.
    disk_mb: float | None = None
    # The GPU monitor's GPUsAverageUsage (GPUsUsage in newer HTCondor): how many GPUs' worth
    # of work the job did on average (0.35 of one GPU, say); and GPUsMemoryUsage, its peak
    # GPU memory in MB.
    gpus_used: float | None = None
    gpu_memory_peak_mb: float | None = None


@dataclass(frozen=True)
class GpuModel:
    name: str
    memory_mb: int
    capability: float


@dataclass(frozen=True)
class LendingTerms:
    """What a workstation's owners lend now, as its kit's cron publishes it in the slot ads
    (docs/lending.md): None where they set no such term."""

    open: bool = True  # False outside their days and hours, or while paused
    gpus: int | None = None  # at most this many GPUs lent at once
    memory_mb: int | None = None  # at most this much memory lent at once
    accounting_groups: tuple[str, ...] | None = None  # only these labs' jobs
    reclaim_by: int | None = None  # its owners asked for it back by then (Unix time)

    @property
    def lent_now(self) -> bool:
        return self.open and self.reclaim_by is None

    @property
    def restricted(self) -> bool:
        return self != LendingTerms()


@dataclass(frozen=True)
class PoolMachine:
    """One execute workstation, summed over its slots."""

    name: str
    state: str
    total_cpus: int
    free_cpus: int
    total_memory_mb: int
    free_memory_mb: int
    total_gpus: int = 0
    free_gpus: int = 0
    gpu: GpuModel | None = None
    runs_containers: bool = False
    terms: LendingTerms = LendingTerms()


# What a job whose input files never arrived is renamed to, and removed with, before it is
# submitted again (Nightshift's job and sweep ids are UUIDs: none takes this value).
WITHDRAWN_ID = "withdrawn"
WITHDRAWN_REASON = (
    "Nightshift: its input files never arrived (its submitter stopped between submitting and "
    "spooling them); it was submitted again"
)


@dataclass(frozen=True)
class ClusterMaking:
    """A late cluster whose schedd has jobs still to make: `next_proc` is the next it makes,
    of `total` (its run n is job n)."""

    cluster_id: int
    next_proc: int
    total: int


def adopted_cluster(
    requests: list[JobRequest],
    found: list[JobObservation],
    sweep_id: str,
    making: ClusterMaking | None = None,
) -> list[SubmitResult] | None:
    """The results of a sweep's earlier submission that the schedd already holds (`found`,
    its runs by the sweep's id, and `making`, its cluster if the schedd has runs of it still
    to make), in the order of `requests`; None when it holds none."""
    by_id = {observation.job_id: observation for observation in found}
    if not by_id and making is None:
        return None
    if making is not None:
        # The runs not made yet have no ad to be known by: run n of the cluster is job n,
        # which holds only if this is the list that was submitted (as every run made says).
        if making.total != len(requests) or any(
            (by_id[r.job_id].cluster_id, by_id[r.job_id].proc_id) != (making.cluster_id, n)
            for n, r in enumerate(requests)
            if r.job_id in by_id
        ):
            raise BridgeError(
                f"sweep {sweep_id} is in the schedd with other runs than these", transient=False
            )
        by_id |= {
            r.job_id: JobObservation(
                job_id=r.job_id,
                cluster_id=making.cluster_id,
                proc_id=n,
                state=JobState.IDLE,
                in_queue=True,
            )
            for n, r in enumerate(requests)
            if n >= making.next_proc and r.job_id not in by_id
        }
    missing = [request.job_id for request in requests if request.job_id not in by_id]
    if missing:
        raise BridgeError(
            f"sweep {sweep_id} is in the schedd without {missing[0]}", transient=False
        )
    return [
        SubmitResult(by_id[r.job_id].cluster_id, by_id[r.job_id].proc_id, adopted=True)
        for r in requests
    ]


def made(job: tuple[int, int], making: Mapping[int, int]) -> bool:
    """Whether the schedd has made the job (cluster, proc): a late cluster makes its jobs
    in order, `making` (clusters_making()) giving the next one of each cluster still at it."""
    cluster_id, proc_id = job
    return cluster_id not in making or proc_id < making[cluster_id]


def not_made_yet(action: str, cluster_id: int, proc_id: int) -> BridgeError:
    """An action on a job its schedd has not made yet, which HTCondor ignores without a word
    (the job would later be made as if nothing had been asked)."""
    return BridgeError(
        f"{action}: HTCondor has not made job {cluster_id}.{proc_id} of its cluster yet "
        "(a large sweep's runs are made as earlier ones leave the queue)",
        transient=True,
    )
