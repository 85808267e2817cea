"""Placement and start-time prediction on a simulated campus: 50 workstations, 4 weeks.

Run with `make bench-placement` (no database, no pool: it is a simulation). It replays one
stream of jobs twice over the same owners, once with HTCondor's default choice of
workstation and once with Nightshift's placement (`condor_bridge.placement`: each job
ranks workstations by their learnt chance of staying free for its runtime), and compares
interruptions, goodput and makespan. Under the Nightshift placement it also predicts each
week-4 job's start when it is submitted (`forecasts.model.starts.predict_start`, with the
models learnt from weeks 1 to 3) and checks the prediction against the start that happened,
beside a naive baseline: the median wait of weeks 1 to 3.

The owners are synthetic. docs/placement.md describes the model and what each of its
parameters rests on: office staff in at about 09:00 and out at about 17:30 on weekdays,
research students later and less regular, teaching-lab machines taken by a weekly class
timetable, machines whose owners rarely come, a campus holiday and owners' leave weeks.
The clocks go back during the four weeks (Europe/Berlin, 25 October).

The default choice: HTCondor's NEGOTIATOR_PRE_JOB_RANK puts the best fit first (the
smallest slot that fits), then NEGOTIATOR_POST_JOB_RANK a fixed order (KFlops, SlotID): so,
among the workstations that fit, the one with the fewest free GPUs, then a fixed order.
Nightshift's choice puts the job's rank first and the default's order after it.
"""

from __future__ import annotations

import argparse
import collections
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from condor_bridge import placement  # noqa: E402
from forecasts.model.availability import SLOT_S, TAKEN, History, PoolModel  # noqa: E402
from forecasts.model.placement import scores  # noqa: E402
from forecasts.model.starts import (  # noqa: E402
    Arrivals,
    Calibration,
    Machine,
    RunningJob,
    WaitingJob,
    calibrate,
    predict_start,
)

ZONE = ZoneInfo("Europe/Berlin")
START = datetime(2026, 10, 5, tzinfo=ZONE)  # a Monday
WEEKS = 4
DRAIN_WEEKS = 2  # owners go on after the last submission, until every job has finished
TICK_S = 300  # the negotiator's cycle, as simulated
CHECKPOINT_S = 1800
HOLIDAY = 9  # the second Wednesday: a campus holiday
LONG_S = 4 * 3600
TICKS_PER_SLOT = SLOT_S // TICK_S


# -- owners ------------------------------------------------------------------------------

KINDS = (("office", 0.40), ("student", 0.30), ("teaching", 0.15), ("rare", 0.15))


@dataclass
class Owner:
    kind: str
    timetable: list[tuple[int, float]] = field(default_factory=list)  # (weekday, start hour)
    leave_week: int | None = None


def make_owner(rng: np.random.Generator) -> Owner:
    kind = KINDS[rng.choice(len(KINDS), p=[share for _, share in KINDS])][0]
    owner = Owner(kind)
    if kind == "teaching":
        blocks = rng.choice(5 * 5, size=int(rng.integers(2, 5)), replace=False)
        owner.timetable = [(int(b) // 5, 8.0 + 2 * (int(b) % 5)) for b in blocks]
    if kind == "office" and rng.random() < 0.15:
        owner.leave_week = int(rng.integers(0, WEEKS + DRAIN_WEEKS))
    return owner


def sessions(owner: Owner, day: int, rng: np.random.Generator) -> list[tuple[float, float]]:
    """The owner's presences on a day, in local hours from its midnight (may pass 24)."""
    weekday = day % 7 < 5
    holiday = day == HOLIDAY
    out: list[tuple[float, float]] = []
    if owner.kind == "office":
        on_leave = owner.leave_week is not None and day // 7 == owner.leave_week
        if weekday and not holiday and not on_leave and rng.random() < 0.92:
            arrive, leave = rng.normal(8.75, 0.6), rng.normal(17.5, 0.8)
            if rng.random() < 0.4:  # out for lunch
                lunch = rng.normal(12.3, 0.3)
                out += [(arrive, lunch), (lunch + rng.uniform(0.5, 1.0), leave)]
            else:
                out.append((arrive, leave))
            if rng.random() < 0.12:  # back in the evening for a moment
                start = rng.uniform(19.5, 22.5)
                out.append((start, start + rng.uniform(0.3, 1.0)))
        elif not weekday and rng.random() < 0.06:
            start = rng.uniform(10, 16)
            out.append((start, start + rng.uniform(1, 3)))
    elif owner.kind == "student":
        chance = 0.3 if holiday else (0.75 if weekday else 0.35)
        if rng.random() < chance:
            arrive = rng.normal(11.5, 1.5)
            out.append((arrive, arrive + min(14.0, rng.lognormal(math.log(6), 0.4))))
            if rng.random() < 0.15:  # a late night
                start = rng.uniform(22, 24)
                out.append((start, start + rng.uniform(1, 3)))
    elif owner.kind == "teaching":
        if weekday and not holiday:
            for weekday_index, hour in owner.timetable:
                if day % 7 == weekday_index and rng.random() < 0.95:
                    out.append((hour - 0.25, hour + 2.0))
            if rng.random() < 0.1:
                start = rng.uniform(8, 18)
                out.append((start, start + 1))
    elif rng.random() < 0.2:  # rare
        start = rng.uniform(8, 20)
        out.append((start, start + rng.uniform(0.5, 3)))
    return out


def owner_ticks(owners: list[Owner], rng: np.random.Generator) -> np.ndarray:
    """present[machine, tick] over the whole simulation."""
    days = 7 * (WEEKS + DRAIN_WEEKS)
    ticks = int(days * 86400 // TICK_S)
    start_utc = START.astimezone(UTC)
    present = np.zeros((len(owners), ticks), dtype=bool)
    for index, owner in enumerate(owners):
        for day in range(days):
            midnight = datetime.combine(
                (START + timedelta(days=day)).date(), datetime.min.time(), tzinfo=ZONE
            )
            for begin, end in sessions(owner, day, rng):
                # Local wall-clock hours become instants through the zone: an owner who
                # comes at 09:00 does so in summer and in winter time.
                first = _wall(midnight, begin).astimezone(UTC)
                last = _wall(midnight, end).astimezone(UTC)
                a = max(0, int((first - start_utc).total_seconds() // TICK_S))
                b = min(ticks, math.ceil((last - start_utc).total_seconds() / TICK_S))
                if b > a:
                    present[index, a:b] = True
    return present


def _wall(midnight: datetime, hours: float) -> datetime:
    """A local wall-clock time, `hours` after local midnight (aware arithmetic in Python is
    on the wall clock, so this is right across a clock change)."""
    return midnight + timedelta(hours=max(0.0, hours))


# -- jobs ---------------------------------------------------------------------------------


@dataclass
class Job:
    index: int
    user: int
    submitted: int  # tick
    gpus: int
    runtime_s: float  # what it really needs
    declared_s: float  # what its owner expects
    done_s: float = 0.0  # work kept (checkpointed or finished)
    started: int | None = None  # first start, tick
    machine: int | None = None
    run_start: int | None = None
    run_done_s: float = 0.0
    interruptions: int = 0
    consumed_s: float = 0.0  # GPU-seconds used, lost work included
    finished: int | None = None
    predicted: object = None
    test: bool = False  # predicted in week 4 (else in week 3, to calibrate)

    @property
    def long(self) -> bool:
        return self.runtime_s > LONG_S


def job_stream(rng: np.random.Generator, rate_per_hour: float) -> list[Job]:
    jobs: list[Job] = []
    users = 30
    weights = 1 / np.arange(1, users + 1)
    weights /= weights.sum()
    ticks = int(WEEKS * 7 * 86400 // TICK_S)
    for tick in range(ticks):
        local = (START + timedelta(seconds=tick * TICK_S)).astimezone(ZONE)
        rate = rate_per_hour
        if local.weekday() >= 5:
            rate *= 0.6
        if 9 <= local.hour < 18:
            rate *= 1.6
        elif local.hour < 7:
            rate *= 0.4
        for _ in range(rng.poisson(rate * TICK_S / 3600)):
            kind = rng.random()
            if kind < 0.35:
                runtime = rng.uniform(10, 60) * 60
            elif kind < 0.65:
                runtime = math.exp(rng.uniform(math.log(3600), math.log(4 * 3600)))
            else:
                runtime = min(30 * 3600, max(LONG_S + 60, rng.lognormal(math.log(8 * 3600), 0.5)))
            gpus = int(rng.choice([1, 2, 4], p=[0.70, 0.22, 0.08]))
            declared = runtime * float(rng.lognormal(0.15, 0.25))
            jobs.append(
                Job(len(jobs), int(rng.choice(users, p=weights)), tick, gpus, runtime, declared)
            )
    return jobs


# -- the simulation -----------------------------------------------------------------------


@dataclass
class Campus:
    gpus: list[int]
    kflops: list[float]
    present: np.ndarray


class Simulation:
    def __init__(
        self,
        campus: Campus,
        jobs: list[Job],
        *,
        nightshift: bool,
        predict: bool,
        rng: np.random.Generator,
    ):
        self.campus = campus
        self.jobs = jobs
        self.nightshift = nightshift
        self.predict = predict
        self.rng = rng
        self.free = list(campus.gpus)
        self.running: dict[int, list[Job]] = {m: [] for m in range(len(campus.gpus))}
        self.queue: list[Job] = []
        self.usage = [0.0] * 64  # per user, decayed GPU-seconds (fair share)
        self.pool: PoolModel | None = None
        self.frozen: PoolModel | None = None  # learnt from weeks 1-3, for predictions
        self.scores: dict[tuple[int, int], dict[int, float]] = {}
        self.ratios: list[float] = []
        self.waits: list[float] = []
        self.frozen_waits: list[float] = []
        self.frozen_ratios: list[float] = []
        self.calibration = Calibration()

    @staticmethod
    def moment(tick: int) -> datetime:
        return (START + timedelta(seconds=tick * TICK_S)).astimezone(UTC)

    # Owners' histories as the portal would have them: 15-minute slots, taken if the owner
    # was there at any moment of it.
    def history(self, machine: int, until_tick: int) -> History:
        ticks = self.campus.present[machine, : until_tick - until_tick % TICKS_PER_SLOT]
        slots = ticks.reshape(-1, TICKS_PER_SLOT).any(axis=1)
        states = np.where(slots, TAKEN, 1).astype(np.int8)
        return History(start=START.astimezone(UTC), states=states)

    def refit(self, tick: int) -> None:
        histories = {str(m): self.history(m, tick) for m in range(len(self.campus.gpus))}
        self.pool = PoolModel.fit(histories, zone=ZONE)
        self.scores.clear()

    def published(self, machine: int, tick: int) -> dict[int, float] | None:
        if self.pool is None:
            return None
        slot = tick // TICKS_PER_SLOT
        key = (machine, slot)
        if key not in self.scores:
            at = (START + timedelta(seconds=slot * SLOT_S)).astimezone(UTC)
            self.scores[key] = scores(self.pool.model(str(machine)), at)
        return self.scores[key]

    def order(self) -> list[Job]:
        # Fair share: the user who used least goes first, then the earliest submission.
        return sorted(self.queue, key=lambda job: (self.usage[job.user], job.submitted))

    def choose(self, job: Job, tick: int, owners: np.ndarray) -> int | None:
        best, best_key = None, None
        for machine, free in enumerate(self.free):
            if owners[machine] or free < job.gpus:
                continue
            default = (-free, self.campus.kflops[machine])  # best fit, then a fixed order
            if self.nightshift:
                rank = placement.preference(self.published(machine, tick), job.declared_s / 3600)
                key = (rank, *default)
            else:
                key = default
            if best_key is None or key > best_key:
                best, best_key = machine, key
        return best

    def snapshot_prediction(self, job: Job, tick: int, owners: np.ndarray) -> None:
        now = (START + timedelta(seconds=tick * TICK_S)).astimezone(UTC)
        machines = []
        for m, gpus in enumerate(self.campus.gpus):
            running = [
                RunningJob(r.gpus, (tick - r.run_start) * TICK_S + r.done_s, r.declared_s)
                for r in self.running[m]
            ]
            machines.append(Machine(str(m), gpus, bool(owners[m]), running))
        order = self.order()
        ahead = [WaitingJob(j.gpus, j.declared_s - j.done_s) for j in order[: order.index(job)]]
        # Of the jobs to come, those of users who used less than this job's user go first.
        share = sum(
            w for user, w in self.user_share.items() if self.usage[user] < self.usage[job.user]
        )
        arrivals = Arrivals(per_slot=self.arrival_rate * share, sizes=self.sizes)
        job.predicted = predict_start(
            now=now,
            machines=machines,
            ahead=ahead,
            job=WaitingJob(job.gpus, job.declared_s),
            pool=self.frozen,
            runtime_ratios=self.frozen_ratios,
            arrivals=arrivals,
            futures=32,
            horizon=timedelta(days=2),
            rng=self.rng,
        )

    def learn_arrivals(self, until_tick: int) -> None:
        """From the jobs submitted so far: how many come per slot, by hour of the week, whose
        they are and how big."""
        seen = [job for job in self.jobs if job.submitted < until_tick]
        counts = np.zeros(168)
        for job in seen:
            local = (START + timedelta(seconds=job.submitted * TICK_S)).astimezone(ZONE)
            counts[local.weekday() * 24 + local.hour] += 1
        weeks = until_tick * TICK_S / (7 * 86400)
        self.arrival_rate = counts / weeks / (3600 / SLOT_S)
        users = collections.Counter(job.user for job in seen)
        self.user_share = {user: count / len(seen) for user, count in users.items()}
        self.sizes = [WaitingJob(job.gpus, job.declared_s) for job in seen]

    def run(self) -> None:
        ticks = self.campus.present.shape[1]
        submit_end = WEEKS * 7 * 86400 // TICK_S
        train_end = 3 * 7 * 86400 // TICK_S
        calibrate_from = 2 * 7 * 86400 // TICK_S
        arrivals = iter(self.jobs)
        pending = next(arrivals, None)
        decay = 0.5 ** (TICK_S / 86400)  # fair share's usage halves in a day
        unfinished = len(self.jobs)
        for tick in range(ticks):
            owners = self.campus.present[:, tick]
            local = (START + timedelta(seconds=tick * TICK_S)).astimezone(ZONE)
            if self.nightshift and local.hour == 4 and local.minute == 0:
                self.refit(tick)
            if tick in (calibrate_from, train_end):
                # Week 3's predictions use what weeks 1-2 taught, and their outcomes
                # calibrate the ranges of week 4's, which use what weeks 1-3 taught.
                self.frozen = PoolModel.fit(
                    {str(m): self.history(m, tick) for m in range(len(self.campus.gpus))},
                    zone=ZONE,
                )
                self.frozen_waits = list(self.waits)
                self.frozen_ratios = list(self.ratios)
                self.learn_arrivals(tick)
            if tick == train_end:
                self.calibration = calibrate(
                    [
                        (job.predicted, self.moment(job.started))
                        for job in self.jobs
                        if job.predicted is not None and job.started is not None
                    ]
                )
            self.usage = [u * decay for u in self.usage]
            # Owners back: their workstations' jobs are evicted, keeping what they saved.
            for machine in np.flatnonzero(owners):
                for job in self.running[machine]:
                    ran = (tick - job.run_start) * TICK_S
                    saved = (ran // CHECKPOINT_S) * CHECKPOINT_S
                    job.done_s = job.run_done_s + saved
                    job.consumed_s += ran * job.gpus
                    job.interruptions += 1
                    job.machine = None
                    self.free[machine] += job.gpus
                    self.queue.append(job)
                self.running[machine] = []
            # Jobs that finish.
            for machine, jobs in self.running.items():
                kept = []
                for job in jobs:
                    ran = (tick - job.run_start) * TICK_S
                    self.usage[job.user] += TICK_S * job.gpus
                    if job.run_done_s + ran >= job.runtime_s:
                        job.consumed_s += ran * job.gpus
                        job.finished = tick
                        self.free[machine] += job.gpus
                        unfinished -= 1
                        self.ratios.append(job.runtime_s / job.declared_s)
                    else:
                        kept.append(job)
                self.running[machine] = kept
            while pending is not None and pending.submitted == tick:
                self.queue.append(pending)
                if self.predict and self.frozen is not None and tick < submit_end:
                    self.snapshot_prediction(pending, tick, owners)
                    pending.test = tick >= train_end
                pending = next(arrivals, None)
            if self.queue and any(f > 0 for f in self.free):
                waiting = []
                for job in self.order():
                    machine = self.choose(job, tick, owners)
                    if machine is None:
                        waiting.append(job)
                        continue
                    self.free[machine] -= job.gpus
                    self.running[machine].append(job)
                    job.machine, job.run_start, job.run_done_s = machine, tick, job.done_s
                    if job.started is None:
                        job.started = tick
                        self.waits.append((tick - job.submitted) * TICK_S)
                self.queue = waiting
            if unfinished == 0 and pending is None:
                break


# -- figures ------------------------------------------------------------------------------


def summary(jobs: list[Job]) -> dict[str, float]:
    long_jobs = [j for j in jobs if j.long]
    finished = [j for j in jobs if j.finished is not None]
    useful = sum(j.runtime_s * j.gpus for j in finished)
    consumed = sum(j.consumed_s for j in finished)
    last = max((j.finished for j in finished), default=0)
    return {
        "jobs": len(jobs),
        "finished": len(finished),
        "long jobs": len(long_jobs),
        "interruptions per long job": sum(j.interruptions for j in long_jobs) / len(long_jobs),
        "long jobs interrupted %": 100
        * sum(j.interruptions > 0 for j in long_jobs)
        / len(long_jobs),
        "interruptions per job": sum(j.interruptions for j in jobs) / len(jobs),
        "goodput %": 100 * useful / consumed if consumed else 0.0,
        "makespan h": last * TICK_S / 3600,
        "GPU-hours used": consumed / 3600,
        "median wait min": statistics.median(
            (j.started - j.submitted) * TICK_S / 60 for j in jobs if j.started is not None
        ),
    }


def prediction_figures(sim: Simulation) -> dict[str, float]:
    predicted = [j for j in sim.jobs if j.test and j.started is not None]
    naive_s = statistics.median(sim.frozen_waits) if sim.frozen_waits else 0.0
    inside = waited_inside = waited = raw_inside = waited_raw = 0
    errors, naive_errors, waited_errors, waited_naive = [], [], [], []
    for job in predicted:
        start = (START + timedelta(seconds=job.started * TICK_S)).astimezone(UTC)
        submitted = (START + timedelta(seconds=job.submitted * TICK_S)).astimezone(UTC)
        hit = sim.calibration.apply(job.predicted).contains(start)
        raw_inside += job.predicted.contains(start)
        inside += hit
        wait_s = (start - submitted).total_seconds()
        if wait_s > SLOT_S:
            waited += 1
            waited_inside += hit
            waited_raw += job.predicted.contains(start)
        errors.append(abs((job.predicted.likely - start).total_seconds()))
        naive_errors.append(abs(naive_s - wait_s))
        if wait_s > SLOT_S:
            waited_errors.append(errors[-1])
            waited_naive.append(naive_errors[-1])
    return {
        "predicted jobs (week 4)": len(predicted),
        "start inside range %": 100 * inside / len(predicted),
        "  of all, before calibration %": 100 * raw_inside / len(predicted),
        **{
            f"  widening, predicted {kind} (x)": math.exp(value)
            for kind, value in sim.calibration.widenings.items()
        },
        "jobs that waited over 15 min": waited,
        "of them inside range %": 100 * waited_inside / waited if waited else 0.0,
        "  of those, before calibration %": 100 * waited_raw / waited if waited else 0.0,
        "median abs error min": statistics.median(errors) / 60,
        "naive baseline median abs error min": statistics.median(naive_errors) / 60,
        "median abs error, jobs that waited min": statistics.median(waited_errors or [0]) / 60,
        "naive baseline, jobs that waited min": statistics.median(waited_naive or [0]) / 60,
        "naive baseline (median wait, weeks 1-3) min": naive_s / 60,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workstations", type=int, default=50)
    parser.add_argument("--rate", type=float, default=6.0, help="jobs per hour, on average")
    parser.add_argument(
        "--quick", action="store_true", help="10 workstations, 1.5 jobs per hour (make test)"
    )
    args = parser.parse_args()
    if args.quick:
        args.workstations, args.rate = 10, 1.5
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    owners = [make_owner(rng) for _ in range(args.workstations)]
    campus = Campus(
        gpus=[int(rng.choice([1, 2, 4], p=[0.5, 0.35, 0.15])) for _ in owners],
        kflops=[float(rng.uniform(1e6, 2e6)) for _ in owners],
        present=owner_ticks(owners, rng),
    )
    jobs = job_stream(rng, args.rate)
    kinds = {kind: sum(o.kind == kind for o in owners) for kind, _ in KINDS}
    print(
        f"campus: {args.workstations} workstations, {sum(campus.gpus)} GPUs; owners {kinds}; "
        f"free {100 * (1 - campus.present[:, : WEEKS * 7 * 288].mean()):.0f} % of the time"
    )
    print(f"jobs: {len(jobs)} over {WEEKS} weeks, {sum(j.long for j in jobs)} over 4 h")
    results = {}
    for name, nightshift in (("HTCondor default", False), ("Nightshift placement", True)):
        copy = [Job(j.index, j.user, j.submitted, j.gpus, j.runtime_s, j.declared_s) for j in jobs]
        sim = Simulation(
            campus,
            copy,
            nightshift=nightshift,
            predict=nightshift,
            rng=np.random.default_rng(args.seed + 7),
        )
        sim.run()
        results[name] = (summary(copy), sim)
    free_gpu_hours = (
        float(
            (
                ~campus.present[:, : WEEKS * 7 * 86400 // TICK_S] * np.array(campus.gpus)[:, None]
            ).sum()
        )
        * TICK_S
        / 3600
    )
    used = results["HTCondor default"][0]["GPU-hours used"]
    print(
        f"load: the jobs used {100 * used / free_gpu_hours:.0f} % of the GPU-hours the owners "
        f"left free in the {WEEKS} weeks"
    )
    print()
    print(f"{'':40s}{'HTCondor default':>20s}{'Nightshift placement':>22s}")
    default, ours = results["HTCondor default"][0], results["Nightshift placement"][0]
    for key in default:
        print(f"{key:40s}{default[key]:>20.2f}{ours[key]:>22.2f}")
    figures = prediction_figures(results["Nightshift placement"][1])
    print()
    print("start-time predictions for week 4 (models from weeks 1-3):")
    for key, value in figures.items():
        print(f"  {key:44s}{value:>10.1f}")
    change = 100 * (ours["interruptions per long job"] / default["interruptions per long job"] - 1)
    print(f"\n({time.perf_counter() - started:.0f} s)")
    print(
        f"interruptions vs default: {change:+.0f} %; "
        f"start inside range: {figures['start inside range %']:.0f} %"
    )


if __name__ == "__main__":
    main()
