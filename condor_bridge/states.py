"""Exact mapping from HTCondor job ads to Nightshift's job states."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from .submit import format_duration
from .types import JobObservation, JobState, JobUsage

# JobStatus values, from the HTCondor manual's job ClassAd attributes.
IDLE, RUNNING, REMOVED, COMPLETED, HELD, TRANSFERRING_OUTPUT, SUSPENDED = range(1, 8)
# HoldReasonCode 16: "Spooling input data files". The job is uploading, not held.
HOLD_CODE_SPOOLING_INPUT = 16
# The schedd's RemoveReason for such a job once its submitter's spool was cut off.
STAGING_FAILED_REASON = "Staging of job files failed"

PROJECTION = [
    "NightshiftJobId",
    "ClusterId",
    "ProcId",
    "JobStatus",
    "HoldReason",
    "HoldReasonCode",
    "HoldReasonSubCode",
    "ExitCode",
    "ExitBySignal",
    "ExitSignal",
    "NumJobStarts",
    "RemoteHost",
    "LastRemoteHost",
    # The central manager of the pool a flocked run is in, or was in (unset for the home pool).
    "RemotePool",
    "LastRemotePool",
    "EnteredCurrentStatus",
    "JobCurrentStartDate",
    "JobCurrentStartExecutingDate",
    "JobStartDate",
    "CompletionDate",
    "RemoveReason",
    "NightshiftRuntimeLimit",
    "NightshiftSessionLimit",
    "LastVacateTime",
    "MachineAttrGPUs_DeviceName0",
    "RemoteWallClockTime",
    "CommittedTime",
    "GPUsProvisioned",
    "RequestGPUs",
    # What a held job had used (its peak memory, its disk), for the hold's explanation.
    "ResidentSetSize",
    "DiskUsage",
]
# A run is in progress in these states; JobCurrentStartDate then dates it.
_RUN_IN_PROGRESS = frozenset({RUNNING, TRANSFERRING_OUTPUT, SUSPENDED})

STATUS_TO_STATE = {
    IDLE: JobState.IDLE,
    RUNNING: JobState.RUNNING,
    REMOVED: JobState.REMOVED,
    COMPLETED: JobState.COMPLETED,
    HELD: JobState.HELD,
    TRANSFERRING_OUTPUT: JobState.TRANSFERRING,
    SUSPENDED: JobState.SUSPENDED,
}


def _run_executing_since(ad: Mapping[str, Any]) -> datetime | None:
    """When the run in progress began (JobCurrentStartDate, its claim's activation, where
    HTCondor's wall clock starts counting), once its job has begun executing
    (JobCurrentStartExecutingDate no earlier; before that, the date is an earlier run's or
    unset). A shadow that starts but never gets its job executing (a claim that could not be
    activated) goes back to the queue with no start counted (NumJobStarts) and no wall time:
    it is no run, and the usage records never see it."""
    started = _int(ad.get("JobCurrentStartDate"))
    executing = _int(ad.get("JobCurrentStartExecutingDate"))
    if started is None or executing is None or executing < started:
        return None
    return _timestamp(started)


def _timestamp(value: Any) -> datetime | None:
    if isinstance(value, int | float) and value > 0:
        return datetime.fromtimestamp(value, tz=UTC)
    return None


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return 0.0
    return float(value)


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def workstation_of(slot_name: str) -> str:
    """`slot1_1@ws-volta@host` and `slot1@host` -> the workstation's name."""
    if not slot_name:
        return ""
    name = slot_name.split("@", 1)[1] if "@" in slot_name else slot_name
    return name.split("@", 1)[0]


def map_job_ad(ad: Mapping[str, Any], *, in_queue: bool) -> JobObservation:
    """Turn one job ad (queue or history) into a JobObservation."""
    # A plain dict: each attribute is converted once, instead of at every lookup.
    ad = dict(ad.items())
    status = _int(ad.get("JobStatus"))
    if status not in STATUS_TO_STATE:
        raise ValueError(f"job ad has an unknown JobStatus {ad.get('JobStatus')!r}")
    state = STATUS_TO_STATE[status]
    hold_code = _int(ad.get("HoldReasonCode"))
    hold_reason = str(ad.get("HoldReason") or "")
    detail = ""
    removed_by_limit = False
    awaiting_input = state is JobState.HELD and hold_code == HOLD_CODE_SPOOLING_INPUT
    if awaiting_input:
        state, detail, hold_reason, hold_code = JobState.TRANSFERRING, "uploading input", "", None
    elif state is JobState.TRANSFERRING:
        detail = "transferring output"
    elif state is JobState.REMOVED:
        detail = str(ad.get("RemoveReason") or "")
        limit = _int(ad.get("NightshiftRuntimeLimit"))
        session_limit = _int(ad.get("NightshiftSessionLimit"))
        if "PeriodicRemove" in detail and session_limit and not (limit and limit < session_limit):
            removed_by_limit = True
            detail = (
                f"HTCondor ended the session: it ran past its time limit of "
                f"{format_duration(session_limit)}."
            )
        elif limit and "PeriodicRemove" in detail:
            removed_by_limit = True
            detail = (
                f"HTCondor removed it: it ran longer than {format_duration(limit)}, the "
                "runtime limit of its quota."
            )
    num_starts = _int(ad.get("NumJobStarts")) or 0
    if state is JobState.IDLE and num_starts:
        detail = "evicted; waiting for another workstation"

    exit_code = exit_signal = None
    if state is JobState.COMPLETED:
        if ad.get("ExitBySignal") is True:
            exit_signal = _int(ad.get("ExitSignal"))
        else:
            exit_code = _int(ad.get("ExitCode"))

    return JobObservation(
        job_id=str(ad.get("NightshiftJobId") or ""),
        cluster_id=_int(ad.get("ClusterId")) or 0,
        proc_id=_int(ad.get("ProcId")) or 0,
        state=state,
        in_queue=in_queue,
        status_detail=detail,
        exit_code=exit_code,
        exit_signal=exit_signal,
        hold_reason=hold_reason if state is JobState.HELD else "",
        hold_reason_code=hold_code if state is JobState.HELD else None,
        hold_reason_subcode=_int(ad.get("HoldReasonSubCode")) if state is JobState.HELD else None,
        num_starts=num_starts,
        workstation=workstation_of(str(ad.get("RemoteHost") or ad.get("LastRemoteHost") or "")),
        gpu_model=str(ad.get("MachineAttrGPUs_DeviceName0") or ""),
        entered_state_at=_timestamp(ad.get("EnteredCurrentStatus")),
        started_at=_timestamp(ad.get("JobCurrentStartDate") or ad.get("JobStartDate")),
        finished_at=_timestamp(ad.get("CompletionDate")),
        wall_time_s=_seconds(ad.get("RemoteWallClockTime")),
        committed_time_s=_seconds(ad.get("CommittedTime")),
        run_started_at=_run_executing_since(ad) if status in _RUN_IN_PROGRESS else None,
        last_workstation=workstation_of(str(ad.get("LastRemoteHost") or "")),
        pool=pool_of(ad),
        last_pool=str(ad.get("LastRemotePool") or ""),
        last_vacated_at=_timestamp(ad.get("LastVacateTime")),
        gpus_assigned=_int(ad.get("GPUsProvisioned")) or _int(ad.get("RequestGPUs")) or 0,
        removed_by_limit=removed_by_limit,
        awaiting_input=awaiting_input,
        held_memory_mb=_kib_as_mb(ad.get("ResidentSetSize")) if state is JobState.HELD else None,
        held_disk_mb=_kib_as_mb(ad.get("DiskUsage")) if state is JobState.HELD else None,
    )


class JobAdMemo:
    """`map_job_ad` over a queue's ads, each ad's observation kept until the next query: an
    ad whose text is unchanged (most of a large queue from one sync to the next) is not
    converted again. Reading an ad's text is one call into classad2; converting its
    attributes one by one cost most of a sync with nothing changed (docs/benchmarks.md).
    What is kept is the last query's, so it never outgrows the queue; a query from another
    thread replaces it whole. The schedd stamps every ad it sends with its clock
    (ServerTime), which nothing here reads: it is taken out before the text is compared."""

    def __init__(self) -> None:
        self._last: dict[str, JobObservation] = {}

    def observations(self, ads: Iterable[Any], *, in_queue: bool) -> list[JobObservation]:
        last, kept, found = self._last, {}, []
        for ad in ads:
            # One call into classad2 per ad (asking first was two; suppress() costs more).
            try:  # noqa: SIM105
                del ad["ServerTime"]
            except KeyError:
                pass
            text = str(ad)
            observation = last.get(text)
            if observation is None:
                observation = map_job_ad(ad, in_queue=in_queue)
            kept[text] = observation
            found.append(observation)
        self._last = kept
        return found


def pool_of(ad: Mapping[str, Any]) -> str:
    """The pool the workstation of a job's run in progress (or else of its last run) is in:
    the central manager another pool's negotiator matched it from, or "" for the home pool."""
    if ad.get("RemoteHost"):
        return str(ad.get("RemotePool") or "")
    return str(ad.get("LastRemotePool") or "")


def _kib_as_mb(value: Any) -> int | None:
    """KiB rounded up to MB, as HTCondor's own MemoryUsage is (ResidentSetSize + 1023) / 1024."""
    kib = _int(value)
    return None if kib is None or kib < 0 else (kib + 1023) // 1024


# What usage sampling reads of a job ad (queue or history), beside its identity.
USAGE_PROJECTION = [
    "NightshiftJobId",
    "JobStatus",
    "HoldReasonCode",
    "NumJobStarts",
    "RemoteHost",
    "LastRemoteHost",
    "JobCurrentStartDate",
    "RequestCpus",
    "RequestMemory",
    "RequestDisk",
    "RequestGPUs",
    "CpusUsage",
    "ResidentSetSize",
    "MemoryUsage",
    "DiskUsage",
    "GPUsUsage",
    "GPUsAverageUsage",
    "GPUsMemoryUsage",
]


def _measured(value: Any, scale: float = 1.0) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value) * scale


def map_usage_ad(ad: Mapping[str, Any], *, in_queue: bool) -> JobUsage:
    """One job ad, its expressions already evaluated (MemoryUsage is one), as a JobUsage."""
    ad = dict(ad.items())
    status = _int(ad.get("JobStatus"))
    if status not in STATUS_TO_STATE:
        raise ValueError(f"job ad has an unknown JobStatus {ad.get('JobStatus')!r}")
    state = STATUS_TO_STATE[status]
    if state is JobState.HELD and _int(ad.get("HoldReasonCode")) == HOLD_CODE_SPOOLING_INPUT:
        state = JobState.TRANSFERRING
    gpus_used = ad.get("GPUsUsage")
    if _measured(gpus_used) is None:
        gpus_used = ad.get("GPUsAverageUsage")
    return JobUsage(
        job_id=str(ad.get("NightshiftJobId") or ""),
        state=state,
        in_queue=in_queue,
        workstation=workstation_of(str(ad.get("RemoteHost") or ad.get("LastRemoteHost") or "")),
        num_starts=_int(ad.get("NumJobStarts")) or 0,
        run_started_at=(
            _timestamp(ad.get("JobCurrentStartDate")) if status in _RUN_IN_PROGRESS else None
        ),
        cpus_requested=_int(ad.get("RequestCpus")) or 0,
        memory_requested_mb=_int(ad.get("RequestMemory")) or 0,
        disk_requested_mb=(_int(ad.get("RequestDisk")) or 0) // 1024,
        gpus_requested=_int(ad.get("RequestGPUs")) or 0,
        cpus_used=_measured(ad.get("CpusUsage")),
        memory_mb=_measured(ad.get("ResidentSetSize"), 1 / 1024),
        memory_peak_mb=_measured(ad.get("MemoryUsage")),
        disk_mb=_measured(ad.get("DiskUsage"), 1 / 1024),
        gpus_used=_measured(gpus_used),
        gpu_memory_peak_mb=_measured(ad.get("GPUsMemoryUsage")),
    )


def staging_failed(job: JobObservation) -> bool:
    """Removed by the schedd because its input files never finished arriving (its submitter
    stopped mid-spool): nothing of it ran, and it may be submitted again."""
    return job.state is JobState.REMOVED and STAGING_FAILED_REASON in job.status_detail


def files_never_arrived(job: JobObservation) -> bool:
    """Its input files never all reached the schedd: still awaited, or given up on by the
    schedd. Nothing of it ran; a retry submits it again and never adopts it."""
    return job.awaiting_input or staging_failed(job)
