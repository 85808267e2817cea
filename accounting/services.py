"""Everything that writes usage records and capacity samples."""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db.models import Max, Q, Sum
from django.utils import timezone

from condor_bridge import JobObservation, PoolMachine
from condor_bridge.submit import CHECKPOINT_LOG
from jobs.models import Job, Workstation
from jobs.selectors import open_job_file
from jobs.services import get_bridge
from plumbing.db import bulk_update_rows

from .models import CapacitySample, UsageRecord
from .quotas import quota_hold as quota_hold
from .quotas import quota_hold_release as quota_hold_release
from .quotas import quota_standings as quota_standings
from .segments import TOLERANCE_S, Segment, reconcile

logger = logging.getLogger(__name__)

_SEGMENT_FIELDS = (
    "started_at",
    "ended_at",
    "workstation",
    "pool",
    "gpu_model",
    "gpus",
    "wall_s",
    "committed_s",
    "ended_by",
    "saved_s",
)
# A workstation in one of these states is not lending its GPUs to the pool.
UNAVAILABLE_STATES = frozenset({"Owner", "Drained", "Preempting", "Backfill", ""})


def _segment_of(record: UsageRecord) -> Segment:
    return Segment(**{name: getattr(record, name) for name in _SEGMENT_FIELDS})


@dataclass(frozen=True)
class RecordedRuns:
    """What a job's usage records already say, enough to tell whether an ad adds anything."""

    closed_wall_s: float = 0.0
    open_started_at: datetime | None = None


def recorded_runs(job_pks: Iterable[int]) -> dict[int, RecordedRuns]:
    """One query for many jobs: their recorded wall time and the run that is open."""
    rows = (
        UsageRecord.objects.filter(job_id__in=list(job_pks))
        .values("job_id")
        .annotate(
            closed=Sum("wall_s", filter=Q(ended_at__isnull=False)),
            open_start=Max("started_at", filter=Q(ended_at__isnull=True)),
        )
    )
    return {row["job_id"]: RecordedRuns(row["closed"] or 0.0, row["open_start"]) for row in rows}


def usage_outdated(recorded: RecordedRuns | None, observation: JobObservation) -> bool:
    """Whether the ad reports a run start or end that the records do not hold yet."""
    recorded = recorded or RecordedRuns()
    if observation.run_started_at != recorded.open_started_at:
        return True
    return observation.wall_time_s - recorded.closed_wall_s > TOLERANCE_S


def usage_record_observations(pairs: Iterable[tuple[object, JobObservation]]) -> dict[int, int]:
    """The same for many jobs at once, whose row locks the caller holds: one query reads
    their records, and new and changed records are written in bulk.

    Returns, for each job whose records changed, how many were created or closed.
    """
    pairs = list(pairs)
    records: dict[int, list[UsageRecord]] = defaultdict(list)
    for record in UsageRecord.objects.filter(job_id__in=[job.pk for job, _ in pairs]).order_by(
        "job_id", "started_at"
    ):
        records[record.job_id].append(record)
    created: list[UsageRecord] = []
    updated: list[UsageRecord] = []
    counts: dict[int, int] = {}
    for job, observation in pairs:
        new, changed = _records_to_write(job, records[job.pk], observation)
        created += new
        updated += changed
        if new or changed:
            counts[job.pk] = len(new) + len(changed)
    UsageRecord.objects.bulk_create(created, batch_size=1000)
    now = timezone.now()
    for record in updated:
        record.recorded_at = now  # auto_now, which bulk_update does not apply
    bulk_update_rows(UsageRecord, updated, [*_SEGMENT_FIELDS, "badput_s", "recorded_at"])
    return counts


class UsageLedger:
    """The usage records, as the sync's run ledger (jobs.sync.RunLedger)."""

    def runs_outdated(self, observations: Mapping[int, JobObservation]) -> set[int]:
        runs = recorded_runs(observations)
        return {pk for pk, seen in observations.items() if usage_outdated(runs.get(pk), seen)}

    def record_runs(self, pairs: list[tuple[Job, JobObservation]]) -> set[int]:
        return set(usage_record_observations(pairs))

    def evictions_without_progress(self, job: Job, limit: int) -> int:
        streak = 0
        for run in job.usage_records.exclude(ended_at=None).order_by("-started_at")[:limit]:
            if run.ended_by != UsageRecord.Ending.EVICTED or run.committed_s > 0:
                break
            streak += 1
        return streak


def _records_to_write(
    job, records: list[UsageRecord], observation: JobObservation
) -> tuple[list[UsageRecord], list[UsageRecord]]:
    """The records to create and those to update for one job's ad."""
    by_start = {record.started_at: record for record in records}
    # The checkpoint log only matters when a run ends; the sync should not read a file for
    # every job it looks at.
    run_ends = any(r.is_open and r.started_at != observation.run_started_at for r in records)
    checkpoints = checkpoint_times(job) if run_ends else []
    segments = reconcile([_segment_of(r) for r in records], observation, checkpoints)
    created: list[UsageRecord] = []
    updated: list[UsageRecord] = []
    previous_end: datetime | None = None
    for segment in segments:
        record = by_start.get(segment.started_at)
        if record is None:
            if previous_end is None:
                wait = segment.started_at - job.created_at
            else:
                wait = segment.started_at - previous_end
            record = UsageRecord(
                job=job,
                user_id=job.owner_id,
                lab_id=job.lab_id,
                first_run=not records and previous_end is None,
                wait_s=max(wait.total_seconds(), 0.0),
            )
            created.append(record)
        elif _segment_of(record) == segment:
            previous_end = record.ended_at
            continue
        else:
            updated.append(record)
        for name in _SEGMENT_FIELDS:
            setattr(record, name, getattr(segment, name))
        record.badput_s = segment.badput_s
        previous_end = record.ended_at
    return created, updated


MAX_CHECKPOINT_LOG_BYTES = 1024 * 1024


def checkpoint_times(job) -> list[datetime]:
    """When the job's helper saved checkpoints (.nightshift/checkpoints.jsonl), if the portal
    can see the job's folder; the job writes this file, so it is read defensively."""
    raw = open_job_file(job.directory, job.directory / CHECKPOINT_LOG)
    if raw is None:
        return []
    times = []
    with raw:
        for line in raw.read(MAX_CHECKPOINT_LOG_BYTES).splitlines():
            try:
                moment = json.loads(line)["time"]
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(moment, int | float) and not isinstance(moment, bool) and moment > 0:
                try:
                    times.append(datetime.fromtimestamp(moment, tz=UTC))
                except (OverflowError, OSError, ValueError):
                    continue
    return times


def capacity_sample(
    machines: Iterable[PoolMachine],
    *,
    known: Mapping[str, int],
    interval_s: int,
    now: datetime | None = None,
) -> int:
    """Record what every workstation's GPUs do in the current interval; once per interval.

    `known` maps every workstation ever seen to its GPU count, so that one that stopped
    reporting (switched off, owner took it out) counts as unavailable rather than vanishing.
    """
    now = now or timezone.now()
    epoch = int(now.timestamp())
    start = datetime.fromtimestamp(epoch - epoch % interval_s, tz=UTC)
    ours: dict[str, int] = defaultdict(int)
    running = UsageRecord.objects.filter(ended_at__isnull=True, gpus__gt=0)
    for row in running.values("workstation").annotate(gpus=Sum("gpus")):
        ours[row["workstation"]] = row["gpus"]
    samples = []
    reporting = set()
    for machine in machines:
        reporting.add(machine.name)
        total = machine.total_gpus
        if not total:
            continue
        # Our own runs are known from their records; the collector's view of the slots can
        # lag a few seconds behind a job that just started.
        nightshift = min(ours.get(machine.name, 0), total)
        if machine.state in UNAVAILABLE_STATES:
            # The owner has it: whatever Nightshift still runs there is being vacated.
            idle, other, unavailable = 0, 0, total - nightshift
        else:
            busy = max(total - machine.free_gpus, nightshift)
            idle, other, unavailable = total - busy, busy - nightshift, 0
        samples.append(
            CapacitySample(
                taken_at=start,
                seconds=interval_s,
                workstation=machine.name,
                total_gpus=total,
                idle_gpus=idle,
                nightshift_gpus=nightshift,
                other_gpus=other,
                unavailable_gpus=unavailable,
            )
        )
    for name, total in known.items():
        if name not in reporting and total:
            samples.append(
                CapacitySample(
                    taken_at=start,
                    seconds=interval_s,
                    workstation=name,
                    total_gpus=total,
                    unavailable_gpus=total,
                )
            )
    # A second tick in the same interval (two beats overlapping) adds nothing.
    CapacitySample.objects.bulk_create(samples, ignore_conflicts=True)
    return len(samples)


def capacity_sample_pool(now: datetime | None = None) -> int:
    """One capacity sample of the whole pool, as the beat schedule takes it."""
    known = dict(Workstation.objects.values_list("name", "total_gpus"))
    machines = get_bridge().pool_machines()
    return capacity_sample(
        machines, known=known, interval_s=settings.CAPACITY_SAMPLE_INTERVAL_S, now=now
    )


def usage_record_energy_set(
    record: UsageRecord, *, kwh: float | None, co2e_kg: float | None, simulated: bool
) -> None:
    """Record a run's GPU energy above idle, measured once its job ended (usage.energy)."""
    record.gpu_energy_kwh, record.co2e_kg, record.energy_simulated = kwh, co2e_kg, simulated
    UsageRecord.objects.filter(pk=record.pk).update(
        gpu_energy_kwh=kwh, co2e_kg=co2e_kg, energy_simulated=simulated
    )


def usage_records_forgive(records: Iterable[UsageRecord]) -> list[UsageRecord]:
    """Charge none of the work these runs lost (their badput) to their users' quotas: it was
    lost when a workstation's owner asked for it back. Returns the records it changed."""
    changed = [record for record in records if record.forgiven_s != record.badput_s]
    for record in changed:
        record.forgiven_s = record.badput_s
        UsageRecord.objects.filter(pk=record.pk).update(forgiven_s=record.badput_s)
    return changed
