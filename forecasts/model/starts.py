"""When a waiting job will start, and how often a run of it will be interrupted.

`predict_start` plays the queue forward many times (Monte Carlo), each time with a possible
future of the owners (sampled from each workstation's learnt chances, by hour of the week,
of its owner coming back or leaving) and of the runtimes (each job's expected runtime times a
ratio of actual to expected drawn from the pool's history). The jobs ahead go first, in the
negotiator's order (fair share); each takes the first workstation with enough free GPUs whose
owner is away; an owner's return sends its jobs back to the queue. The job's start in each
future gives the range: the central 80 % of them.

`expected_interruptions` is the number of times owners should interrupt a run of a given
length, from the same chances, with the checkpoint interval that keeps the loss small.

Pure Python and numpy: no Django.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from .availability import (
    SLOT_S,
    PoolModel,
    WorkstationModel,
    hour_of_week,
    quarter_of_week,
)

COVERAGE = 0.8


@dataclass(frozen=True)
class RunningJob:
    gpus: int
    elapsed_s: float
    expected_s: float


@dataclass
class Machine:
    name: str
    gpus: int
    owner_present: bool
    running: list[RunningJob] = field(default_factory=list)


@dataclass(frozen=True)
class WaitingJob:
    gpus: int
    expected_s: float


@dataclass(frozen=True)
class Arrivals:
    """The jobs still to come that will go ahead of this one (fair share puts a later job
    of a user who used less first): the expected number per slot, by hour of the week,
    and examples of their sizes to draw from."""

    per_slot: np.ndarray  # 168 floats
    sizes: Sequence[WaitingJob]


@dataclass(frozen=True)
class StartPrediction:
    """The central 80 % of the job's possible starts; `latest` None when more than a tenth
    of the futures played do not start it within the horizon."""

    made_at: datetime
    earliest: datetime
    likely: datetime
    latest: datetime | None
    within_horizon: float
    futures: int
    horizon: timedelta
    coverage: float = COVERAGE
    widened_by: float = 0.0

    @property
    def kind(self) -> str:
        if self.latest is not None and self.latest <= self.made_at + timedelta(seconds=SLOT_S):
            return "now"
        return "waits"

    def widened(self, widening: float) -> StartPrediction:
        """The range stretched by a calibrated widening (see `calibrate`): by the factor
        e**widening on the waits, each counted from the prediction plus one slot."""
        if widening <= 0:
            return self
        slot = timedelta(seconds=SLOT_S)
        factor = math.exp(widening)
        earliest = self.made_at + max(
            timedelta(0), (self.earliest - self.made_at + slot) / factor - slot
        )
        latest = None
        if self.latest is not None:
            latest = self.made_at + (self.latest - self.made_at + slot) * factor - slot
        return dataclasses.replace(self, earliest=earliest, latest=latest, widened_by=widening)

    def contains(self, moment: datetime, *, slack: timedelta = timedelta(0)) -> bool:
        if moment < self.earliest - slack:
            return False
        return self.latest is None or moment <= self.latest + slack


def sample_owners(
    *,
    now: datetime,
    present_now: Sequence[bool],
    models: Sequence[WorkstationModel],
    slots: int,
    futures: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Possible futures of the owners: present[future, machine, slot], slot 0 being now."""
    present = np.empty((futures, len(models), slots), dtype=bool)
    for index, (model, taken) in enumerate(zip(models, present_now, strict=True)):
        present[:, index, :] = model.sample_futures(
            now=now, taken_now=bool(taken), slots=slots, futures=futures, rng=rng
        )
    return present


def predict_start(
    *,
    now: datetime,
    machines: Sequence[Machine],
    ahead: Sequence[WaitingJob],
    job: WaitingJob,
    pool: PoolModel,
    runtime_ratios: Sequence[float] = (1.0,),
    matches: Callable[[Machine], bool] = lambda machine: True,
    arrivals: Arrivals | None = None,
    futures: int = 40,
    horizon: timedelta = timedelta(days=3),
    rng: np.random.Generator | None = None,
    closed: Callable[[Machine], Sequence[tuple[datetime, datetime]]] = lambda machine: (),
) -> StartPrediction:
    """`closed(machine)` gives the windows in which the job may not start on a machine it
    matches: another lab's reservations of it."""
    rng = rng if rng is not None else np.random.default_rng(0)
    slots = max(1, int(horizon.total_seconds() // SLOT_S))
    shut = _shut(now, machines, closed, slots)
    models = [pool.model(machine.name) for machine in machines]
    present = sample_owners(
        now=now,
        present_now=[m.owner_present for m in machines],
        models=models,
        slots=slots,
        futures=futures,
        rng=rng,
    )
    ratios = np.asarray(runtime_ratios or (1.0,), dtype=float)
    fits_job = [matches(machine) for machine in machines]
    zone = pool.zone
    hours = [hour_of_week(now + timedelta(seconds=slot * SLOT_S), zone) for slot in range(slots)]
    starts: list[float] = []
    for future in range(futures):
        start = _play(
            machines, ahead, job, present[future], ratios, fits_job, rng, arrivals, hours, shut
        )
        starts.append(math.inf if start is None else start)
    ordered = np.sort(np.asarray(starts))
    tail = (1 - COVERAGE) / 2
    within = float(np.isfinite(ordered).mean())

    def at(quantile: float, within: float) -> datetime | None:
        """The quantile's slot, and `within` of the way through it."""
        value = float(np.quantile(ordered, quantile, method="inverted_cdf"))
        if math.isinf(value):
            return None
        return now + timedelta(seconds=(value + within) * SLOT_S)

    earliest = at(tail, 0.0) or now + horizon
    likely = at(0.5, 0.0) or now + horizon
    latest = at(1 - tail, 1.0)
    return StartPrediction(
        made_at=now,
        earliest=earliest,
        likely=likely,
        latest=latest,
        within_horizon=within,
        futures=futures,
        horizon=horizon,
    )


def _shut(now: datetime, machines: Sequence[Machine], closed, slots: int) -> np.ndarray:
    """shut[machine, slot]: a start in that slot would fall in one of the machine's closed
    windows."""
    shut = np.zeros((len(machines), slots), dtype=bool)
    for index, machine in enumerate(machines):
        for begins, ends in closed(machine):
            first = max(0, math.ceil((begins - now).total_seconds() / SLOT_S))
            shut[index, first : max(first, math.ceil((ends - now).total_seconds() / SLOT_S))] = True
    return shut


def _slots(seconds: float) -> int:
    return max(1, math.ceil(seconds / SLOT_S))


def _play(
    machines, ahead, job, present, ratios, fits_job, rng, arrivals, hours, shut
) -> int | None:
    """One future: the slot the job starts in, or None past the horizon. Each job takes the
    workstation that fits it best (fewest free GPUs), as HTCondor's default does."""
    machine_count, slots = present.shape
    shut_changes = np.any(shut[:, 1:] != shut[:, :-1], axis=0)
    free = [machine.gpus for machine in machines]
    # Running work: [machine, gpus, end slot, queue position (-1: before every waiting job)].
    running: list[list[int]] = []
    for index, machine in enumerate(machines):
        for run in machine.running:
            remaining = run.expected_s * float(rng.choice(ratios)) - run.elapsed_s
            end = _slots(remaining) if remaining > 0 else int(rng.integers(1, 5))
            running.append([index, run.gpus, end, -1, 0])
            free[index] -= run.gpus
    # The queue: [position, gpus, duration in slots, may use the job's machines only].
    queue = [
        [position, waiting.gpus, _slots(waiting.expected_s * float(rng.choice(ratios))), False]
        for position, waiting in enumerate(ahead)
    ]
    target = len(ahead)
    queue.append([target, job.gpus, 0, True])
    changed = True
    for slot in range(slots):
        owners = present[:, slot]
        if slot:
            if shut_changes[slot - 1]:
                changed = True
            for index in range(machine_count):
                if owners[index] != present[index, slot - 1]:
                    changed = True
            kept = []
            for run in running:
                index = run[0]
                if owners[index]:  # evicted: back to the queue, in its place
                    free[index] += run[1]
                    queue.append([run[3], run[1], max(1, run[2] - slot), False])
                    changed = True
                elif run[2] <= slot:
                    free[index] += run[1]
                    changed = True
                else:
                    kept.append(run)
            running = kept
            if arrivals is not None and arrivals.sizes:
                for _ in range(rng.poisson(arrivals.per_slot[hours[slot]])):
                    size = arrivals.sizes[int(rng.integers(len(arrivals.sizes)))]
                    duration = _slots(size.expected_s * float(rng.choice(ratios)))
                    queue.append([target - 0.5, size.gpus, duration, False])
                    changed = True
            if changed:
                queue.sort()
        if not changed:
            continue
        changed = False
        still = []
        for entry in queue:
            position, gpus, duration, _ = entry
            best = None
            for index in range(machine_count):
                if owners[index] or free[index] < gpus:
                    continue
                if position == target and (not fits_job[index] or shut[index, slot]):
                    continue
                if best is None or free[index] < free[best]:
                    best = index
            if best is None:
                still.append(entry)
            elif position == target:
                return slot
            else:
                free[best] -= gpus
                running.append([best, gpus, slot + duration, position, 0])
        queue = still
    return None


def nonconformity(prediction: StartPrediction, started: datetime) -> float:
    """How far outside its range a start fell, as the log of the ratio of waits (each
    counted from the prediction plus one slot); 0 inside."""
    slot = SLOT_S
    wait = (started - prediction.made_at).total_seconds() + slot
    low = (prediction.earliest - prediction.made_at).total_seconds() + slot
    score = max(0.0, math.log(low / wait))
    if prediction.latest is not None:
        high = (prediction.latest - prediction.made_at).total_seconds() + slot
        score = max(score, math.log(wait / high))
    return score


@dataclass(frozen=True)
class Calibration:
    """Widenings learnt from earlier predictions and the starts that followed, one per
    kind of prediction: those that said "now" and those that said the job would wait
    (so that the many jobs that start at once do not hide how the waiting ones fared)."""

    widenings: Mapping[str, float] = field(default_factory=dict)

    def apply(self, prediction: StartPrediction) -> StartPrediction:
        return prediction.widened(self.widenings.get(prediction.kind, 0.0))


def calibrate(
    outcomes: Sequence[tuple[StartPrediction, datetime]], coverage: float = COVERAGE
) -> Calibration:
    """For each kind of prediction, the widening that would have put `coverage` of its
    starts inside their ranges (split conformal prediction, by group: the
    ceil((n + 1) x coverage)-th smallest score); none without outcomes, so that a new
    portal shows the model's own ranges."""
    scores: dict[str, list[float]] = {}
    for prediction, started in outcomes:
        scores.setdefault(prediction.kind, []).append(nonconformity(prediction, started))
    widenings = {}
    for kind, values in scores.items():
        values.sort()
        rank = min(len(values), math.ceil((len(values) + 1) * coverage))
        widenings[kind] = values[rank - 1]
    return Calibration(widenings)


@dataclass(frozen=True)
class InterruptionForecast:
    expected: float
    checkpoint_every: timedelta
    # What they add to the run, checkpointing that often: half an interval of work lost at
    # each interruption, and the checkpoints' own time. The wait for another workstation is
    # not in it.
    added: timedelta = timedelta(0)

    def text(self) -> str:
        minutes = int(self.checkpoint_every.total_seconds() // 60)
        if self.expected < 0.05:
            return f"Interruptions are unlikely; checkpoint every {minutes} minutes anyway."
        return (
            f"Expect about {self.expected:.1f} interruption"
            f"{'s' if round(self.expected, 1) != 1 else ''} by owners; "
            f"checkpoint every {minutes} minutes."
        )


def expected_interruptions(
    *, model: WorkstationModel, start: datetime, runtime: timedelta, cost: timedelta
) -> InterruptionForecast:
    """Owners' expected interruptions of a run of `runtime` from `start` on the workstation
    `model` learnt, and the checkpoint interval that keeps the work lost small (Young's
    sqrt(2 x cost x mean time between interruptions), between 5 and 60 minutes).

    The first interruption is this workstation's owner's; once moved, the job runs on a
    workstation like the pool's others.
    """
    returns, _ = model.transition_probabilities()
    pool_returns = model.pool.transition_probabilities()[0] if model.pool else returns
    expected, still_here = 0.0, 1.0
    slots = _slots(runtime.total_seconds())
    for slot in range(1, slots + 1):
        quarter = quarter_of_week(start + timedelta(seconds=slot * SLOT_S), model.zone)
        here = float(returns[quarter])
        expected += still_here * here + (1 - still_here) * float(pool_returns[quarter])
        still_here *= 1 - here
    if expected <= 0:
        every = timedelta(hours=1)
    else:
        between_s = runtime.total_seconds() / expected
        every = timedelta(seconds=math.sqrt(2 * cost.total_seconds() * between_s))
    every = min(max(every, timedelta(minutes=5)), timedelta(hours=1))
    added = expected * every / 2 + cost * (runtime / every)
    return InterruptionForecast(expected=expected, checkpoint_every=every, added=added)
