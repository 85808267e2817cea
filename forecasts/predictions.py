"""Start-time predictions for the jobs that wait, refreshed by beat.

Every NIGHTSHIFT_START_PREDICTION_S the portal plays each waiting job's queue forward
(`forecasts.model.starts.predict_start`) from what it knows now:

- the workstations (one pool query): their GPUs, whether the owner is back, and the portal's
  jobs running there with their maximum runtimes; GPUs busy with other work stay busy;
- the workstations' owners, from the histories the nightly refit learnt from;
- the jobs ahead, in the order HTCondor's negotiator takes them: jobs with a deadline first,
  the earliest deadline first (they share their lab's deadline lane); then fair share, the
  user who used the fewest GPU-hours lately first (each hour counting half after a day,
  HTCondor's default PRIORITY_HALFLIFE), then the earliest submitted;
- the jobs still to come that would go ahead, at the rate jobs came at that hour of the week
  over the last four weeks;
- runtimes: a job's maximum runtime (or the median runtime of recent jobs) times a ratio of
  actual to maximum drawn from recent jobs.

Each job's first prediction is kept. Once such jobs have started, their starts calibrate the
ranges shown (`forecasts.model.starts.calibrate`), so that 80 % of starts fall inside them.
"""

from __future__ import annotations

import logging
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from django.db import transaction
from django.db.models import Count, F, Sum
from django.db.models.functions import ExtractHour, ExtractIsoWeekDay, Greatest, TruncDay
from django.utils import timezone

from accounting.models import UsageRecord
from condor_bridge import JobRequest, PoolMachine, machine_fits
from jobs.models import Job, JobState
from jobs.services import get_bridge, request_from_json

from .model.availability import HOURS_PER_WEEK, SLOT_S, PoolModel
from .model.starts import (
    Arrivals,
    Calibration,
    InterruptionForecast,
    Machine,
    RunningJob,
    StartPrediction,
    WaitingJob,
    calibrate,
    expected_interruptions,
    predict_start,
)
from .models import StartPrediction as StoredPrediction
from .models import WorkstationForecast
from .reservations import held_text, reservations_live, window_text
from .services import campus_zone, history_of
from .texts import deadline_text, start_text

logger = logging.getLogger(__name__)

HORIZON = timedelta(days=2)
FUTURES = 32
MOST_JOBS_PER_CYCLE = 200
HALF_LIFE = timedelta(days=1)
DEFAULT_RUNTIME_S = 3600.0
# What saving a checkpoint costs, for the suggested interval: a minute, as for a model and its
# optimizer state of a few GB; the portal cannot know a job's own.
CHECKPOINT_COST = timedelta(minutes=1)

_pool_cache: dict[tuple, PoolModel] = {}


def stored_pool() -> PoolModel:
    """The pool's models, from the histories the last refit stored (kept between cycles
    until the next refit)."""
    forecasts = list(WorkstationForecast.objects.exclude(history_start=None))
    key = (str(campus_zone()), tuple(sorted((f.workstation, f.fitted_at) for f in forecasts)))
    if key not in _pool_cache:
        _pool_cache.clear()
        histories = {f.workstation: history_of(f) for f in forecasts}
        _pool_cache[key] = PoolModel.fit(histories, zone=campus_zone())
    return _pool_cache[key]


def _decayed_usage(now: datetime) -> dict[int, float]:
    """Each user's recent GPU-hours, each halving in weight after HALF_LIFE (summed by day in
    the database: a few rows per user, however many runs)."""
    usage: dict[int, float] = defaultdict(float)
    by_day = (
        UsageRecord.objects.filter(started_at__gte=now - 7 * HALF_LIFE)
        .annotate(day=TruncDay("started_at"))
        .values("user_id", "day")
        .annotate(gpu_s=Sum(F("wall_s") * Greatest(F("gpus"), 1)))
    )
    for row in by_day:
        age = (now - row["day"]).total_seconds() / HALF_LIFE.total_seconds()
        usage[row["user_id"]] += (row["gpu_s"] or 0) / 3600 * 0.5 ** max(age - 0.5, 0)
    return usage


def _queue_rank(request: dict, usage: float) -> tuple[int, float]:
    """Where the negotiator takes a job: a deadline's lane first (its lab's jobs with
    deadlines share one submitter that has used little), earliest deadline first; then the
    others, the user who used least first."""
    finish_by = (request or {}).get("finish_by_s")
    return (0, float(finish_by)) if finish_by is not None else (1, usage)


def _runtimes(now: datetime) -> tuple[list[float], float]:
    """Ratios of actual runtime to maximum runtime, and the median runtime, of recent jobs."""
    recent = Job.objects.filter(
        state=JobState.COMPLETED, finished_at__gte=now - timedelta(days=30)
    ).order_by("-finished_at")[:500]
    walls = dict(
        UsageRecord.objects.filter(job__in=recent)
        .values("job")
        .annotate(total=Sum("wall_s"))
        .values_list("job", "total")
    )
    ratios, runtimes = [], []
    for job in recent.only("pk", "request"):
        wall = walls.get(job.pk)
        if not wall:
            continue
        runtimes.append(wall)
        limit = (job.request or {}).get("max_runtime_s")
        if limit:
            ratios.append(min(1.0, wall / limit))
    median = statistics.median(runtimes) if runtimes else DEFAULT_RUNTIME_S
    return ratios or [1.0], median


def _expected_s(job: Job, median_runtime: float) -> float:
    return float((job.request or {}).get("max_runtime_s") or median_runtime)


def _arrivals(now: datetime, median_runtime: float) -> tuple[np.ndarray, list, Counter]:
    """Jobs per slot by hour of the week over the last four weeks (counted in the database),
    the sizes of the latest ones, and how many each user submitted."""
    zone = campus_zone()
    recent = Job.objects.filter(created_at__gte=now - timedelta(weeks=4))
    counts = np.zeros(HOURS_PER_WEEK)
    by_hour = (
        recent.annotate(
            day=ExtractIsoWeekDay("created_at", tzinfo=zone),
            hour=ExtractHour("created_at", tzinfo=zone),
        )
        .values("day", "hour")
        .annotate(jobs=Count("id"))
    )
    for row in by_hour:
        counts[(row["day"] - 1) * 24 + row["hour"]] += row["jobs"]
    per_slot = counts / 4.0 / (3600 / SLOT_S)
    latest = recent.order_by("-created_at").only("gpus", "request")[:500]
    sizes = [WaitingJob(job.gpus, _expected_s(job, median_runtime)) for job in latest]
    submitters = Counter(
        dict(recent.values("owner_id").annotate(jobs=Count("id")).values_list("owner_id", "jobs"))
    )
    return per_slot, sizes, submitters


def _calibration(now: datetime) -> Calibration:
    outcomes = []
    firsts = StoredPrediction.objects.filter(
        first=True, made_at__gte=now - timedelta(days=30), job__started_at__isnull=False
    ).select_related("job")[:1000]
    for stored in firsts:
        outcomes.append((_as_prediction(stored, widened_by=0.0), stored.job.started_at))
    return calibrate(outcomes)


def _as_prediction(stored: StoredPrediction, *, widened_by: float) -> StartPrediction:
    return StartPrediction(
        made_at=stored.made_at,
        earliest=stored.earliest,
        likely=stored.likely,
        latest=stored.latest,
        within_horizon=stored.within_horizon,
        futures=FUTURES,
        horizon=timedelta(seconds=stored.horizon_s),
        widened_by=widened_by,
    )


@dataclass
class _Pool:
    """What every prediction of one cycle shares: the pool as it is now."""

    now: datetime
    pool_machines: list
    machines: list[Machine]
    waiting: list[Job]  # in the negotiator's order
    usage: dict[int, float]
    ratios: list[float]
    median_runtime: float
    model: PoolModel
    per_slot: np.ndarray
    sizes: list[WaitingJob]
    submitters: Counter
    calibration: Calibration
    rng: np.random.Generator
    # Reservations that begin within the horizon: (the lab's group, workstations, from, until).
    reserved: list[tuple[str, list[str], datetime, datetime]]

    @classmethod
    def at(cls, now: datetime, pool_machines: list[PoolMachine] | None = None) -> _Pool:
        """The pool at `now`; its machines queried unless given."""
        waiting = list(Job.objects.filter(state=JobState.IDLE, cluster_id__isnull=False))
        if pool_machines is None:
            pool_machines = get_bridge().pool_machines()
        usage = _decayed_usage(now)
        waiting.sort(
            key=lambda job: (
                *_queue_rank(job.request, usage.get(job.owner_id, 0.0)),
                job.submitted_at or now,
            )
        )
        ratios, median_runtime = _runtimes(now)
        running: dict[str, list[RunningJob]] = defaultdict(list)
        for job in Job.objects.filter(state=JobState.RUNNING).exclude(workstation=""):
            elapsed = (now - (job.started_at or now)).total_seconds()
            running[job.workstation].append(
                RunningJob(job.gpus, elapsed, _expected_s(job, median_runtime))
            )
        machines = []
        for machine in pool_machines:
            ours = running.get(machine.name, [])
            # GPUs busy with work from outside the portal stay busy for the horizon.
            usable = min(machine.total_gpus, machine.free_gpus + sum(r.gpus for r in ours))
            machines.append(Machine(machine.name, usable, machine.state == "Owner", ours))
        per_slot, sizes, submitters = _arrivals(now, median_runtime)
        return cls(
            now=now,
            pool_machines=pool_machines,
            machines=machines,
            waiting=waiting,
            usage=usage,
            ratios=ratios,
            median_runtime=median_runtime,
            model=stored_pool(),
            per_slot=per_slot,
            sizes=sizes,
            submitters=submitters,
            calibration=_calibration(now),
            rng=np.random.default_rng(int(now.timestamp())),
            reserved=[
                (r.lab.accounting_group, r.workstations, r.starts_at, r.ends_at)
                for r in reservations_live(now).filter(starts_at__lt=now + HORIZON)
            ],
        )

    def fitting(self, request: JobRequest) -> set[str]:
        """The workstations a job of `request` fits."""
        return {m.name for m in self.pool_machines if machine_fits(request, m)}

    def closed_to(self, request: JobRequest) -> dict[str, list[tuple[datetime, datetime]]]:
        """The windows in which other labs' reservations keep a job of `request` off each
        workstation."""
        closed: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
        for group, names, begins, ends in self.reserved:
            if group != request.accounting_group:
                for name in names:
                    closed[name].append((begins, ends))
        return closed

    def open_to(self, request: JobRequest, *, at: datetime) -> set[str]:
        """The workstations it fits that no other lab's reservation holds at `at`."""
        closed = self.closed_to(request)

        def held(name: str) -> bool:
            return any(begins <= at < ends for begins, ends in closed.get(name, ()))

        return {name for name in self.fitting(request) if not held(name)}

    def interruptions(self, request: JobRequest, *, start: datetime) -> InterruptionForecast | None:
        """Owners' expected interruptions of a run of its maximum runtime from `start`, on
        the workstation its rank prefers: the one likeliest to stay free that long."""
        names = sorted(self.open_to(request, at=start))
        if not request.max_runtime_s or not names:
            return None
        hours = request.max_runtime_s / 3600
        best = max(
            names, key=lambda name: self.model.model(name).stay_free(start, hours).probability
        )
        return expected_interruptions(
            model=self.model.model(best),
            start=start,
            runtime=timedelta(seconds=request.max_runtime_s),
            cost=CHECKPOINT_COST,
        )

    def predict(self, *, request: JobRequest, owner_id: int, ahead: list[Job]) -> StartPrediction:
        fitting = self.fitting(request)
        closed = self.closed_to(request)
        mine = self.usage.get(owner_id, 0.0)
        total = sum(self.submitters.values()) or 1
        share = (
            sum(
                count for user, count in self.submitters.items() if self.usage.get(user, 0.0) < mine
            )
            / total
        )
        if request.finish_by_s is not None:
            share = 0.0  # the lane goes ahead of jobs to come, bar a rare earlier deadline
        expected = float(request.max_runtime_s or self.median_runtime)
        return predict_start(
            now=self.now,
            machines=self.machines,
            ahead=[WaitingJob(o.gpus, _expected_s(o, self.median_runtime)) for o in ahead],
            job=WaitingJob(request.gpus, expected),
            pool=self.model,
            runtime_ratios=self.ratios,
            matches=lambda machine: machine.name in fitting,
            closed=lambda machine: closed.get(machine.name, ()),
            arrivals=Arrivals(per_slot=self.per_slot * share, sizes=self.sizes),
            futures=FUTURES,
            horizon=HORIZON,
            rng=self.rng,
        )


def starts_predict(*, now: datetime | None = None) -> int:
    """Predict the start of every waiting job (the first MOST_JOBS_PER_CYCLE in the queue's
    order); returns how many were predicted."""
    if not Job.objects.filter(state=JobState.IDLE, cluster_id__isnull=False).exists():
        return 0
    pool = _Pool.at(now or timezone.now())
    done = 0
    for position, job in enumerate(pool.waiting[:MOST_JOBS_PER_CYCLE]):
        request = request_from_json(job.request, job_id=str(job.public_id), job_dir=job.output_dir)
        prediction = pool.predict(
            request=request, owner_id=job.owner_id, ahead=pool.waiting[:position]
        )
        interruptions = pool.interruptions(request, start=prediction.likely)
        _store(job, prediction, pool.calibration, interruptions=interruptions)
        done += 1
    return done


def draft_start(*, user, request: JobRequest, machines: list[PoolMachine]) -> dict:
    """For the form's live answer, on the machines the match already read: when a job of this
    request, submitted now, would likely start; how often owners would interrupt it (with a
    maximum runtime); and the reservations that keep it off workstations or put it first."""
    pool = _Pool.at(timezone.now(), machines)
    mine = _queue_rank({"finish_by_s": request.finish_by_s}, pool.usage.get(user.pk, 0.0))
    ahead = [
        job
        for job in pool.waiting
        if _queue_rank(job.request, pool.usage.get(job.owner_id, 0.0)) <= mine
    ]
    prediction = pool.calibration.apply(
        pool.predict(request=request, owner_id=user.pk, ahead=ahead)
    )
    interruptions = pool.interruptions(request, start=prediction.likely)
    deadline = ""
    if request.finish_by_s is not None:
        finish_by = datetime.fromtimestamp(request.finish_by_s, tz=UTC)
        deadline = deadline_text(
            prediction,
            finish_by=finish_by,
            runtime_s=request.max_runtime_s,
            now=pool.now,
            interruptions_s=_added_s(interruptions),
        )
    return {
        "start_text": start_text(prediction, pool.now),
        "deadline_text": deadline,
        "interruptions_text": interruptions.text() if interruptions else "",
        "reservation_text": reservations_text(request, pool.fitting(request), pool.now),
    }


def reservations_text(request: JobRequest, fitting: set[str], now: datetime) -> str:
    """What reservations on now or in the next day mean for a job of `request`."""
    mine, others = [], []
    for reservation in reservations_live(now).filter(starts_at__lt=now + timedelta(days=1)):
        held = sorted(fitting & set(reservation.workstations))
        if held:
            ours = reservation.lab.accounting_group == request.accounting_group
            (mine if ours else others).append((reservation, held))
    parts = []
    for reservation, held in others:
        parts.append(
            f"{_names(held)} {'is' if len(held) == 1 else 'are'} "
            f"{held_text(reservation)}: this job will not start there then."
        )
    for reservation, held in mine:
        parts.append(
            f"Your lab's reservation puts it first on {_names(held)} {window_text(reservation)}."
        )
    return " ".join(parts)


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _added_s(interruptions: InterruptionForecast | None) -> float:
    return interruptions.added.total_seconds() if interruptions else 0.0


def _store(
    job: Job,
    prediction: StartPrediction,
    calibration: Calibration,
    *,
    interruptions: InterruptionForecast | None = None,
) -> None:
    fields = {
        "interruptions": interruptions.text() if interruptions else "",
        "interruptions_s": round(_added_s(interruptions)),
        "made_at": prediction.made_at,
        "earliest": prediction.earliest,
        "likely": prediction.likely,
        "latest": prediction.latest,
        "horizon_s": int(prediction.horizon.total_seconds()),
        "within_horizon": prediction.within_horizon,
        "widened_by": calibration.widenings.get(prediction.kind, 0.0),
    }
    with transaction.atomic():
        # The first prediction, as made (uncalibrated), is what later ones calibrate on.
        StoredPrediction.objects.get_or_create(job=job, first=True, defaults=fields)
        StoredPrediction.objects.update_or_create(job=job, first=False, defaults=fields)


def shown(stored: StoredPrediction) -> StartPrediction:
    """A stored prediction with the calibration it was made with applied."""
    return _as_prediction(stored, widened_by=0.0).widened(stored.widened_by)
