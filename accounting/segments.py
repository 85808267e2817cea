"""Run segments from HTCondor's own accounting: pure, so that scripted histories test it.

HTCondor keeps cumulative counters in each job's ad: RemoteWallClockTime (wall time of
every run that has ended) and CommittedTime (the part of it that was kept: runs that
completed, or work saved by a checkpoint). Each observation of the ad is compared with the
segments already recorded; what the counters have grown by since is the run (or runs) that
ended in between. The result depends only on the recorded segments and the ad, so applying
the same observation twice, or again after a crash, changes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from condor_bridge import JobObservation
from condor_bridge import JobState as CondorState

# Counters are whole seconds in practice; anything smaller is rounding, not a run.
TOLERANCE_S = 0.5


class EndedBy:
    RUNNING = ""
    COMPLETED = "completed"
    EVICTED = "evicted"
    HELD = "held"
    REMOVED = "removed"


@dataclass(frozen=True)
class Segment:
    """One run of a job on one workstation; `ended_at` is None while it runs."""

    started_at: datetime
    ended_at: datetime | None = None
    workstation: str = ""
    # The central manager of the pool the workstation is in, "" for the home pool.
    pool: str = ""
    gpu_model: str = ""
    gpus: int = 0
    wall_s: float = 0.0
    committed_s: float = 0.0
    ended_by: str = EndedBy.RUNNING
    # The part of committed_s known from the helper's checkpoint log, not from HTCondor's
    # counters (which do not count a checkpoint kept on a shared file system).
    saved_s: float = 0.0

    @property
    def is_open(self) -> bool:
        return self.ended_at is None

    @property
    def badput_s(self) -> float:
        """Work lost: an eviction's wall time that no checkpoint saved."""
        if self.ended_by != EndedBy.EVICTED:
            return 0.0
        return max(self.wall_s - self.committed_s, 0.0)


def _ended_by(observation: JobObservation) -> str:
    if observation.state is CondorState.COMPLETED:
        return EndedBy.COMPLETED
    if observation.state is CondorState.REMOVED:
        return EndedBy.REMOVED
    if observation.state is CondorState.HELD:
        return EndedBy.HELD
    return EndedBy.EVICTED


def _end_of_last_run(observation: JobObservation) -> datetime | None:
    """When the most recent run that ended did so, from the ad."""
    if observation.last_vacated_at is not None and observation.state not in (
        CondorState.COMPLETED,
        CondorState.REMOVED,
    ):
        return observation.last_vacated_at
    return observation.finished_at or observation.last_vacated_at or observation.entered_state_at


# HTCondor dates a run's end in whole seconds, before the job has quite finished saving
# the checkpoint its SIGTERM asked for: a checkpoint this soon after the end belongs to it.
CHECKPOINT_SLACK = timedelta(seconds=10)


def _saved_before(start: datetime, end: datetime, checkpoints: Sequence[datetime]) -> float:
    """Seconds of the run [start, end] kept by the last checkpoint saved within it."""
    inside = [moment for moment in checkpoints if start <= moment <= end + CHECKPOINT_SLACK]
    return (max(inside) - start).total_seconds() if inside else 0.0


def reconcile(
    recorded: list[Segment], observation: JobObservation, checkpoints: Sequence[datetime] = ()
) -> list[Segment]:
    """The job's segments after this observation, oldest first (recorded ones kept as they are
    unless they ended).

    `checkpoints` are the times the job's helper saved a checkpoint. HTCondor's
    CommittedTime does not count a checkpoint kept on a shared file system, so an evicted run
    keeps what the counters say or, if more, the work up to its last checkpoint.
    """
    segments = sorted(recorded, key=lambda s: s.started_at)
    closed_wall = sum(s.wall_s for s in segments if not s.is_open)
    closed_committed = sum(s.committed_s - s.saved_s for s in segments if not s.is_open)
    unaccounted_wall = observation.wall_time_s - closed_wall
    unaccounted_committed = max(observation.committed_time_s - closed_committed, 0.0)
    running_since = observation.run_started_at
    result: list[Segment] = []
    for segment in segments:
        if not segment.is_open or segment.started_at == running_since:
            result.append(segment)
            continue
        # The run this segment recorded has ended.
        if unaccounted_wall > TOLERANCE_S:
            wall = unaccounted_wall
        elif running_since is None and observation.state in (
            CondorState.REMOVED,
            CondorState.COMPLETED,
        ):
            # Gone from the queue without HTCondor counting the run: its end is all we have.
            end = _end_of_last_run(observation) or segment.started_at
            wall = max((end - segment.started_at).total_seconds(), 0.0)
        else:
            result.append(segment)  # the counters have not caught up yet
            continue
        committed = min(unaccounted_committed, wall)
        ended_by = EndedBy.EVICTED if running_since is not None else _ended_by(observation)
        saved = 0.0
        if ended_by == EndedBy.EVICTED:
            end = segment.started_at + timedelta(seconds=wall)
            saved = max(
                min(_saved_before(segment.started_at, end, checkpoints), wall) - committed, 0.0
            )
        result.append(
            dataclasses.replace(
                segment,
                ended_at=segment.started_at + timedelta(seconds=wall),
                wall_s=wall,
                committed_s=committed + saved,
                ended_by=ended_by,
                saved_s=saved,
            )
        )
        unaccounted_wall -= wall
        unaccounted_committed -= committed
    if unaccounted_wall > TOLERANCE_S:
        # A run that began and ended between two observations: dated back from its end.
        end = _end_of_last_run(observation)
        if running_since is not None and (end is None or end > running_since):
            end = running_since
        if end is not None:
            committed = min(unaccounted_committed, unaccounted_wall)
            pool = observation.last_pool if observation.last_workstation else observation.pool
            result.append(
                Segment(
                    started_at=end - timedelta(seconds=unaccounted_wall),
                    ended_at=end,
                    workstation=observation.last_workstation or observation.workstation,
                    pool=pool,
                    gpu_model=observation.gpu_model,
                    gpus=observation.gpus_assigned,
                    wall_s=unaccounted_wall,
                    committed_s=committed,
                    ended_by=EndedBy.EVICTED if running_since else _ended_by(observation),
                )
            )
    if (
        not result
        and running_since is None
        and observation.state in (CondorState.COMPLETED, CondorState.REMOVED)
        and observation.num_starts > 0
        and observation.started_at is not None
    ):
        # Seen only once it had ended, and before HTCondor counted the run: a short job whose
        # ad leaves the queue in the same moment the shadow adds its wall time, or a run of
        # under a second, which HTCondor counts as none (both seen with jobs on another
        # pool). Its dates are all there is; the run is recorded even at 0 s, with where it ran.
        end = max(_end_of_last_run(observation) or observation.started_at, observation.started_at)
        wall = (end - observation.started_at).total_seconds()
        pool = observation.last_pool if observation.last_workstation else observation.pool
        result.append(
            Segment(
                started_at=observation.started_at,
                ended_at=end,
                workstation=observation.last_workstation or observation.workstation,
                pool=pool,
                gpu_model=observation.gpu_model,
                gpus=observation.gpus_assigned,
                wall_s=wall,
                committed_s=wall if observation.state is CondorState.COMPLETED else 0.0,
                ended_by=_ended_by(observation),
            )
        )
    if running_since is not None and all(s.started_at != running_since for s in result):
        result.append(
            Segment(
                started_at=running_since,
                workstation=observation.workstation,
                pool=observation.pool,
                gpu_model=observation.gpu_model,
                gpus=observation.gpus_assigned,
            )
        )
    return sorted(result, key=lambda s: s.started_at)
