"""What the sync compares: the active jobs' rows, read again only where a row changed, and
HTCondor's observations of them, compared again only where either side changed.

Reading every active job's fields was a fifth of a sync with nothing changed at 100,000
jobs (docs/benchmarks.md). PostgreSQL stamps every version of a row with the id of the
transaction that wrote it (the `xmin` system column), whoever wrote it: a model's save, a
bulk update, raw SQL, another process. A row whose stamp is the one read last cycle is the
very version read then, so its fields are taken from then; the others are read afresh. The
same stamp serves optimistic locking elsewhere (Npgsql's and EF Core's xmin concurrency
token). Every version a transaction writes carries that transaction's id, but another
session only ever sees its last one, after it commits: within one open transaction (a test's,
or a caller's atomic block) the stamps prove nothing, and every row is read.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from django.db import connection
from django.db.models import TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast
from django.utils import timezone

from condor_bridge import JobObservation
from condor_bridge import JobState as CondorState

from .models import FINAL_STATES, Job, JobOutcome, JobState

# What a sync compares; the rest of a job's row (its request above all) is not read, and
# rows are read as plain values: building 10,000 model instances would cost more than the
# comparison.
SYNC_FIELDS = (
    "pk",
    "public_id",
    "schedd",
    "cluster_id",
    "proc_id",
    "state",
    "status_detail",
    "hold_reason",
    "hold_reason_code",
    "hold_reason_subcode",
    "hold_memory_mb",
    "hold_disk_mb",
    "num_starts",
    "workstation",
    "pool",
    "gpu_model",
    "exit_code",
    "exit_signal",
    "started_at",
    "finished_at",
    "match_problem",
    "wait_reason",
    "outcome",
)
SyncRow = namedtuple("SyncRow", SYNC_FIELDS)

# Past this share of the active rows changed, one read of them all beats naming each.
READ_ALL_SHARE = 0.25


_read_sync_fields = attrgetter(*SYNC_FIELDS)
_PUBLIC_ID = SYNC_FIELDS.index("public_id")


def sync_row(job: Any) -> SyncRow:
    """What the sync compares of a job (a model instance, or a row read as values), its
    public id as text, as HTCondor's ads carry it."""
    fields = list(_read_sync_fields(job))
    fields[_PUBLIC_ID] = str(fields[_PUBLIC_ID])
    return SyncRow._make(fields)


# The rows' columns, the public id read as text: the sync looks each job's ad up by it, and
# turning 100,000 UUIDs into text in Python took a tenth of a second each cycle.
_COLUMNS = tuple("public_id_text" if name == "public_id" else name for name in SYNC_FIELDS)


def _active():
    return (
        Job.objects.filter(cluster_id__isnull=False)
        .exclude(state__in=FINAL_STATES)
        .annotate(public_id_text=Cast("public_id", TextField()))
    )


def _with_version(queryset):
    # The model's own table name, quoted: no user text reaches this SQL.
    table = connection.ops.quote_name(Job._meta.db_table)
    version = RawSQL(f"{table}.xmin::text::bigint", ())  # noqa: S611
    return queryset.annotate(row_version=version)


class ActiveRows:
    """The rows of the jobs HTCondor holds (submitted, not ended), kept between reads by
    their row version; one instance per process (the sync's)."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[int, SyncRow]] = {}

    def read(self) -> list[SyncRow]:
        """The rows, in the order of their keys; a row unchanged since the last read is
        the very object read then."""
        if connection.vendor != "postgresql" or connection.in_atomic_block:
            self._last = {}
            return list(map(SyncRow._make, _active().order_by("pk").values_list(*_COLUMNS)))
        last, kept, stale = self._last, {}, []
        versions = _with_version(_active()).order_by("pk").values_list("pk", "row_version")
        for pk, version in versions:
            seen = last.get(pk)
            if seen is None or seen[0] != version:
                seen = None
                stale.append(pk)
            kept[pk] = seen
        if stale:
            fresh = _with_version(_active()).order_by("pk")
            if len(stale) <= READ_ALL_SHARE * len(kept):
                fresh = fresh.filter(pk__in=stale)
            # Read after the versions: a row may have moved on, or ended, in between; what
            # this read finds is what the sync compares, remembered with its own stamp.
            for version, *fields in fresh.values_list("row_version", *_COLUMNS):
                kept[fields[0]] = (version, SyncRow._make(fields))
            kept = {pk: seen for pk, seen in kept.items() if seen is not None}
        self._last = kept
        return [row for _, row in kept.values()]


def portal_state(observation: JobObservation) -> str:
    if observation.state is CondorState.COMPLETED:
        ok = observation.exit_code == 0 and observation.exit_signal is None
        return JobState.COMPLETED if ok else JobState.FAILED
    return JobState(observation.state.value)


def observed_changes(
    job: Job, observation: JobObservation, *, cancel_requested: bool = False
) -> dict:
    """The fields of `job` that differ from what HTCondor reports.

    `cancel_requested` only decides the outcome of a removed job, which changes its state
    too: a caller that only asks whether anything differs can leave it out. Jobs that
    ended are never compared: HTCondor has nothing more to say about them.
    """
    new_state = portal_state(observation)
    values = {
        "state": new_state,
        "status_detail": observation.status_detail,
        "hold_reason": observation.hold_reason,
        "hold_reason_code": observation.hold_reason_code,
        "hold_reason_subcode": observation.hold_reason_subcode,
        "hold_memory_mb": observation.held_memory_mb,
        "hold_disk_mb": observation.held_disk_mb,
        "num_starts": max(job.num_starts, observation.num_starts),
        "workstation": observation.workstation or job.workstation,
        "pool": observation.pool if observation.workstation else job.pool,
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


def may_have_run(job, observation: JobObservation) -> bool:
    """Whether the portal's row or HTCondor's ad shows that the job ever started (usage
    records are written with the row that says so, in one transaction)."""
    return bool(
        job.num_starts
        or job.started_at
        or observation.num_starts
        or observation.started_at
        or observation.run_started_at
        or observation.wall_time_s
    )


class Comparison:
    """Splits the active jobs into those out of line with their observations and those in
    line, comparing again only what changed since the last split; one instance per process
    (the sync's).

    The bridge hands back the very observation of a queue ad whose text did not change, and
    ActiveRows the very row that did not change: a job whose row and observation are both
    those of the last split gets the last split's answer (observed_changes depends on
    nothing else for a job still in line). A whole queue as it was is answered at once."""

    def __init__(self) -> None:
        self._in_line: dict[int, tuple[SyncRow, JobObservation]] = {}
        self._last: tuple[list, dict, dict, dict] | None = None

    def split(
        self, active: list[SyncRow], observations: Mapping[str, JobObservation]
    ) -> tuple[dict[int, JobObservation], dict[int, JobObservation], dict[int, JobObservation]]:
        """(outdated, unchanged, started), each keyed by job pk: the jobs whose rows differ
        from their observations, those in line, and of those the ones that may have run
        (whose usage records the run ledger is asked about)."""
        last = self._last
        if last is not None and last[0] == active and last[1] == observations:
            return {}, last[2], last[3]
        last_in_line, in_line = self._in_line, {}
        outdated, unchanged = {}, {}
        for job in active:
            observation = observations.get(job.public_id)
            if observation is None:
                continue
            if last_in_line.get(job.pk) == (job, observation) or not observed_changes(
                job, observation
            ):
                unchanged[job.pk] = observation
                in_line[job.pk] = (job, observation)
            else:
                outdated[job.pk] = observation
        self._in_line = in_line
        # Only a job that has started can have a run to record: most of a large queue waits,
        # and asking the ledger about every one was a fifth of a cycle with nothing changed.
        started = {pk: seen for pk, (job, seen) in in_line.items() if may_have_run(job, seen)}
        # Remembered whole only when everything was in line: a job out of line now (its
        # write may yet be refused) is compared again next time.
        self._last = None if outdated else (active, dict(observations), unchanged, started)
        return outdated, unchanged, started
