"""How likely a workstation is to stay free of its owner, learnt from its history.

A workstation's history is a series of equal slots (15 minutes by default), each free (the
owner away, so jobs may run), taken (the owner back, or the machine unavailable) or unknown
(not seen). From it the model answers, for a moment and a duration: the chance that a
workstation free at that moment stays free for that long. It counts, for the same hour of
the week in the past, how often a free workstation stayed free that long (the remaining idle
period probability of Wyckoff, Jeong and Johnson, NYU TR1998-761, by hour of the week since
the time of day improves those predictions).

Little history gives a wide range and a low confidence, never a confident wrong answer: each
estimate is pulled towards a broader one (the same hour on every weekday, then the pool's
same hour of the week, then an even chance), by as many pseudo-observations as
`PRIOR_WEIGHT`. Hours of the week are local (the campus's time zone), so that an owner who
arrives at 09:00 still does after a clock change.

Pure Python and numpy: no Django, so that the benchmark and the portal share it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np

FREE, TAKEN, UNKNOWN = 1, 0, -1
HOURS_PER_WEEK = 168
QUARTERS_PER_WEEK = 4 * HOURS_PER_WEEK
# The quarter hours around the one asked about count too, less the further they are.
NEIGHBOURS = ((0, 1.0), (-1, 0.75), (1, 0.75), (-2, 0.5), (2, 0.5))
SLOT_S = 900
# Pseudo-observations an estimate borrows from the broader one above it.
PRIOR_WEIGHT = 3.0
# The range shown is the central 80 % (Wilson's interval; z for 10 % either side).
Z_80 = 1.2816


@dataclass(frozen=True)
class History:
    """A workstation's states, one per slot from `start` (aware), `slot_s` seconds each."""

    start: datetime
    states: np.ndarray  # int8: FREE, TAKEN or UNKNOWN
    slot_s: int = SLOT_S

    @property
    def end(self) -> datetime:
        return self.start + timedelta(seconds=self.slot_s * len(self.states))

    @classmethod
    def from_intervals(
        cls,
        *,
        start: datetime,
        end: datetime,
        taken: Sequence[tuple[datetime, datetime]],
        unknown: Sequence[tuple[datetime, datetime]] = (),
        slot_s: int = SLOT_S,
    ) -> History:
        """Build a history from the intervals the owner was present (and any unseen ones):
        a slot is taken if the owner was there at any moment of it."""
        count = max(0, math.ceil((end - start).total_seconds() / slot_s))
        states = np.full(count, FREE, dtype=np.int8)
        for value, intervals in ((TAKEN, taken), (UNKNOWN, unknown)):
            for begin, finish in intervals:
                first = max(0, int((begin - start).total_seconds() // slot_s))
                last = min(count, math.ceil((finish - start).total_seconds() / slot_s))
                if last > first:
                    states[first:last] = value
        return cls(start=start, states=states, slot_s=slot_s)


@dataclass(frozen=True)
class Estimate:
    """A probability with its 80 % range and how much of the workstation's own history
    stands behind it: the days seen free at that quarter hour of the week, the quarter
    hours around it counting less (`NEIGHBOURS`: three weeks make about 10, "high")."""

    probability: float
    low: float
    high: float
    observations: float

    @property
    def confidence(self) -> str:
        if self.observations >= 8:
            return "high"
        if self.observations >= 3:
            return "medium"
        return "low"


def hour_of_week(moment: datetime, zone: ZoneInfo) -> int:
    local = moment.astimezone(zone)
    return local.weekday() * 24 + local.hour


@functools.lru_cache(maxsize=200_000)
def _quarter_of_week_at(epoch_s: int, zone: ZoneInfo) -> int:
    local = datetime.fromtimestamp(epoch_s, UTC).astimezone(zone)
    return (local.weekday() * 24 + local.hour) * 4 + local.minute // 15


def quarter_of_week(moment: datetime, zone: ZoneInfo) -> int:
    """The local quarter hour of the week (0 is Monday 00:00-00:15)."""
    return _quarter_of_week_at(int(moment.timestamp()) // 900 * 900, zone)


def _slot_quarters(history: History, zone: ZoneInfo) -> np.ndarray:
    """The local quarter hour of the week of each slot's start (time zones change on whole
    quarter hours)."""
    start = int(history.start.timestamp())
    return np.fromiter(
        (
            _quarter_of_week_at((start + i * history.slot_s) // 900 * 900, zone)
            for i in range(len(history.states))
        ),
        dtype=np.int16,
        count=len(history.states),
    )


def _remaining_free(states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each slot, the free slots from it on (0 when not free), and whether that run
    reaches an unknown slot or the end of the history (so its true length is unknown)."""
    count = len(states)
    remaining = np.zeros(count, dtype=np.int32)
    censored = np.zeros(count, dtype=bool)
    run, open_ended = 0, True
    for index in range(count - 1, -1, -1):
        state = states[index]
        if state == FREE:
            run += 1
        else:
            run, open_ended = 0, state == UNKNOWN
        remaining[index] = run
        censored[index] = open_ended and state == FREE
    return remaining, censored


def _near(quarter: int) -> list[tuple[int, float]]:
    return [((quarter + offset) % QUARTERS_PER_WEEK, weight) for offset, weight in NEIGHBOURS]


def _wilson(successes: float, trials: float) -> tuple[float, float]:
    if trials <= 0:
        return 0.0, 1.0
    p = min(1.0, max(0.0, successes / trials))
    z2 = Z_80 * Z_80
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = Z_80 * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


def _shrink(successes: float, trials: float, prior: float) -> float:
    return (successes + PRIOR_WEIGHT * prior) / (trials + PRIOR_WEIGHT)


@dataclass
class WorkstationModel:
    """One workstation's learnt behaviour. Build it with `fit`; ask it with `stay_free`."""

    name: str
    zone: ZoneInfo
    slot_s: int
    observed_days: float
    # Per quarter hour of the week: the remaining free runs (in slots) of the free slots seen
    # then,
    # and whether each was cut short by the end of what was seen.
    runs: list[np.ndarray] = field(repr=False)
    runs_censored: list[np.ndarray] = field(repr=False)
    # Per hour of the week: slots seen (not unknown), and of them free.
    seen: np.ndarray = field(repr=False)
    free: np.ndarray = field(repr=False)
    # Per quarter hour of the week: free-to-taken and taken-to-free changes, over the slots
    # in each state they could have changed from (for sampling futures).
    returns: np.ndarray = field(repr=False)
    leaves: np.ndarray = field(repr=False)
    # The history itself, with each slot's local quarter hour of the week: futures are
    # sampled from it (`sample_futures`).
    states: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8), repr=False)
    quarters: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int16), repr=False)
    pool: PoolModel | None = field(default=None, repr=False)

    @classmethod
    def fit(
        cls, name: str, history: History, *, zone: ZoneInfo, pool: PoolModel | None = None
    ) -> WorkstationModel:
        if history.slot_s != SLOT_S:
            raise ValueError(f"histories are in slots of {SLOT_S} s")
        quarters = _slot_quarters(history, zone)
        hours = quarters // 4
        states = history.states
        remaining, censored = _remaining_free(states)
        runs, runs_censored = [], []
        order = np.argsort(quarters, kind="stable")
        bounds = np.searchsorted(quarters[order], np.arange(QUARTERS_PER_WEEK + 1))
        for quarter in range(QUARTERS_PER_WEEK):
            at = order[bounds[quarter] : bounds[quarter + 1]]
            at = at[states[at] == FREE]
            runs.append(remaining[at])
            runs_censored.append(censored[at])
        seen = np.bincount(hours[states != UNKNOWN], minlength=HOURS_PER_WEEK).astype(float)
        free = np.bincount(hours[states == FREE], minlength=HOURS_PER_WEEK).astype(float)
        now, nxt, quarter_now = states[:-1], states[1:], quarters[1:]
        went = (now == FREE) & (nxt == TAKEN)
        came = (now == TAKEN) & (nxt == FREE)
        from_free = (now == FREE) & (nxt != UNKNOWN)
        from_taken = (now == TAKEN) & (nxt != UNKNOWN)
        returns = np.stack(
            [
                np.bincount(quarter_now[went], minlength=QUARTERS_PER_WEEK),
                np.bincount(quarter_now[from_free], minlength=QUARTERS_PER_WEEK),
            ]
        ).astype(float)
        leaves = np.stack(
            [
                np.bincount(quarter_now[came], minlength=QUARTERS_PER_WEEK),
                np.bincount(quarter_now[from_taken], minlength=QUARTERS_PER_WEEK),
            ]
        ).astype(float)
        slots_per_day = 86400 / history.slot_s
        return cls(
            name=name,
            zone=zone,
            slot_s=history.slot_s,
            observed_days=float((states != UNKNOWN).sum()) / slots_per_day,
            runs=runs,
            runs_censored=runs_censored,
            seen=seen,
            free=free,
            returns=returns,
            leaves=leaves,
            states=states,
            quarters=quarters,
            pool=pool,
        )

    # -- counting --------------------------------------------------------------------

    def _slots_per_hour(self) -> float:
        return 3600 / self.slot_s

    def survival_counts(self, quarters: Sequence[tuple[int, float]], needed: int):
        """Successes and trials (each a day seen at that quarter hour) over weighted quarter
        hours of the week."""
        successes = trials = 0.0
        for quarter, weight in quarters:
            runs, cut = self.runs[quarter], self.runs_censored[quarter]
            stayed = runs >= needed
            counted = stayed | ~cut
            successes += weight * float(stayed.sum())
            trials += weight * float(counted.sum())
        return successes, trials

    def needed_slots(self, hours: float) -> int:
        return max(1, math.ceil(hours * 3600 / self.slot_s))

    # -- answers ---------------------------------------------------------------------

    def stay_free(self, at: datetime, hours: float) -> Estimate:
        """The chance that the workstation, free at `at`, stays free for `hours`."""
        quarter = quarter_of_week(at, self.zone)
        needed = self.needed_slots(hours)
        prior = self.pool.stay_free(at, hours).probability if self.pool else 0.5
        day, of_day = divmod(quarter, 96)
        same_kind = [d * 96 + of_day for d in (range(5) if day < 5 else range(5, 7))]
        broad = _shrink(*self.survival_counts([(q, 1.0) for q in same_kind], needed), prior)
        successes, trials = self.survival_counts(_near(quarter), needed)
        probability = _shrink(successes, trials, broad)
        # The range trusts the borrowed estimate as one observation only: a workstation with
        # little history of its own may not behave like the rest.
        low, high = _wilson(probability * (trials + 1), trials + 1)
        return Estimate(probability, min(low, probability), max(high, probability), trials)

    def free_probability(self, at: datetime) -> float:
        """The chance that the owner is away at `at`."""
        return self.free_probability_hour(hour_of_week(at, self.zone))

    def free_probability_hour(self, hour: int) -> float:
        per_hour = self._slots_per_hour()
        prior = self.pool.free_hour(hour) if self.pool else 0.5
        return _shrink(self.free[hour] / per_hour, self.seen[hour] / per_hour, prior)

    def transition_probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """Per quarter hour of the week, the chance that a free workstation is taken then,
        and that a taken one is freed: to sample possible futures."""
        pool_return, pool_leave = (
            self.pool.transition_probabilities()
            if self.pool
            else (np.full(QUARTERS_PER_WEEK, 0.02),) * 2
        )
        ret = (self.returns[0] + PRIOR_WEIGHT * pool_return) / (self.returns[1] + PRIOR_WEIGHT)
        leave = (self.leaves[0] + PRIOR_WEIGHT * pool_leave) / (self.leaves[1] + PRIOR_WEIGHT)
        return np.clip(ret, 0.0, 1.0), np.clip(leave, 0.0, 1.0)

    def sample_futures(
        self,
        *,
        now: datetime,
        taken_now: bool,
        slots: int,
        futures: int,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Possible futures of the owner from `now`: taken[future, slot], slot 0 now.

        Each future replays the workstation's own past from a moment like this one: the
        same quarter hour of the week (or, half the time, of another day of the same kind,
        weekday or weekend) when it was in the same state, so that an office owner at
        their desk at 14:00 stays there until evening as they did before. Without enough
        history, futures come from the chances by hour of the week (a Markov chain), the
        pool's where the workstation has none of its own.
        """
        quarter = quarter_of_week(now, self.zone)
        usable = len(self.states) - slots
        out = np.empty((futures, slots), dtype=bool)
        candidates_week = candidates_kind = np.zeros(0, dtype=np.int64)
        if usable > 0:
            head = self.quarters[:usable]
            state = self.states[:usable]
            wanted = TAKEN if taken_now else FREE
            same_state = state == wanted
            candidates_week = np.flatnonzero((head == quarter) & same_state)
            day, of_day = divmod(int(quarter), 96)
            kind = (head // 96 < 5) if day < 5 else (head // 96 >= 5)
            candidates_kind = np.flatnonzero((head % 96 == of_day) & kind & same_state)
        if len(candidates_kind) == 0:
            return self._markov_futures(now, taken_now, slots, futures, rng)
        for future in range(futures):
            pick_from = candidates_week
            if len(pick_from) == 0 or rng.random() < 0.5:
                pick_from = candidates_kind
            start = int(pick_from[rng.integers(len(pick_from))])
            window = self.states[start : start + slots]
            # An unknown slot of the past is taken as it was just before it.
            out[future] = window == TAKEN
        return out

    def _markov_futures(self, now, taken_now, slots, futures, rng) -> np.ndarray:
        returns, leaves = self.transition_probabilities()
        out = np.empty((futures, slots), dtype=bool)
        state = np.full(futures, taken_now, dtype=bool)
        out[:, 0] = state
        for slot in range(1, slots):
            quarter = quarter_of_week(now + timedelta(seconds=slot * self.slot_s), self.zone)
            draw = rng.random(futures)
            state = np.where(state, draw >= leaves[quarter], draw < returns[quarter])
            out[:, slot] = state
        return out

    def reclaimed_nights(self, history: History) -> tuple[int, int]:
        """Of the nights (19:00 to 08:00, local) the workstation was free at their start,
        how many its owner interrupted; and how many there were."""
        return _reclaimed_nights(history, self.zone)

    def describe(self, history: History | None = None) -> str:
        """A sentence for the pool page: when it is usually free, and how often it was
        reclaimed at night."""
        return describe(self, history)


def _reclaimed_nights(history: History, zone: ZoneInfo) -> tuple[int, int]:
    interrupted = nights = 0
    first_local = history.start.astimezone(zone)
    day = first_local.replace(hour=19, minute=0, second=0, microsecond=0)
    while day.astimezone(UTC) < history.end:
        begin = day.astimezone(UTC)
        finish = (day + timedelta(hours=13)).astimezone(UTC)
        first = int((begin - history.start).total_seconds() // history.slot_s)
        last = int((finish - history.start).total_seconds() // history.slot_s)
        day = (day + timedelta(days=1)).replace(hour=19)
        if first < 0 or last > len(history.states):
            continue
        window = history.states[first:last]
        if window[0] != FREE or (window == UNKNOWN).any():
            continue
        nights += 1
        interrupted += bool((window == TAKEN).any())
    return interrupted, nights


def _free_span(probabilities: Sequence[float], threshold: float) -> tuple[int, int] | None:
    """The longest run of hours of the day (wrapping past midnight) at or above threshold,
    as (first hour, hour after the last)."""
    good = [p >= threshold for p in probabilities]
    if all(good):
        return (0, 24)
    best: tuple[int, int] | None = None
    for start in range(24):
        if not good[start] or good[start - 1]:
            continue
        length = 0
        while length < 24 and good[(start + length) % 24]:
            length += 1
        if best is None or length > best[1]:
            best = (start, length)
    if best is None:
        return None
    return best[0], (best[0] + best[1]) % 24


def describe(model: WorkstationModel, history: History | None = None) -> str:
    if model.observed_days < 1:
        return "Too new to say: seen for less than a day, so its predictions are wide."
    weekday = [
        float(np.mean([model.free_probability_hour(d * 24 + h) for d in range(5)]))
        for h in range(24)
    ]
    span = _free_span(weekday, 0.8)
    if span == (0, 24):
        text = "Usually free all day on weekdays"
    elif span is None:
        text = "Rarely free for long on weekdays"
    else:
        text = f"Usually free {span[0]:02d}:00-{span[1]:02d}:00 on weekdays"
    weekend = [model.free_probability_hour(d * 24 + h) for d in (5, 6) for h in range(24)]
    if min(weekend) >= 0.8:
        text += " and all weekend"
    if history is not None:
        interrupted, nights = model.reclaimed_nights(history)
        if nights:
            text += f"; reclaimed on {interrupted} of the last {nights} nights"
    return text + "."


@dataclass
class PoolModel:
    """What the pool's workstations do together: the prior for each one's estimates."""

    zone: ZoneInfo
    members: list[WorkstationModel] = field(default_factory=list, repr=False)
    _survival: dict[tuple[int, int], Estimate] = field(default_factory=dict, repr=False)

    @classmethod
    def fit(cls, histories: dict[str, History], *, zone: ZoneInfo) -> PoolModel:
        pool = cls(zone=zone)
        pool.members = [
            WorkstationModel.fit(name, history, zone=zone, pool=pool)
            for name, history in histories.items()
        ]
        return pool

    def model(self, name: str) -> WorkstationModel:
        """The named workstation's model; one never seen gets the pool's behaviour, with
        the low confidence of no history of its own."""
        for member in self.members:
            if member.name == name:
                return member
        empty = np.zeros(0, dtype=np.int8)
        return WorkstationModel.fit(
            name, History(start=datetime.now(UTC), states=empty), zone=self.zone, pool=self
        )

    def stay_free(self, at: datetime, hours: float) -> Estimate:
        key = (quarter_of_week(at, self.zone), max(1, math.ceil(hours * 3600 / SLOT_S)))
        if key not in self._survival:
            successes = trials = 0.0
            for member in self.members:
                s, t = member.survival_counts(_near(key[0]), key[1])
                successes, trials = successes + s, trials + t
            probability = _shrink(successes, trials, 0.5)
            low, high = _wilson(probability * (trials + PRIOR_WEIGHT), trials + PRIOR_WEIGHT)
            self._survival[key] = Estimate(probability, low, high, trials)
        return self._survival[key]

    def free_hour(self, hour: int) -> float:
        seen = sum(m.seen[hour] for m in self.members)
        free = sum(m.free[hour] for m in self.members)
        per_hour = 3600 / SLOT_S
        return _shrink(free / per_hour, seen / per_hour, 0.5)

    def free_probability(self, at: datetime) -> float:
        return self.free_hour(hour_of_week(at, self.zone))

    def transition_probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.members:
            return np.full(QUARTERS_PER_WEEK, 0.02), np.full(QUARTERS_PER_WEEK, 0.02)
        returns = sum(m.returns for m in self.members)
        leaves = sum(m.leaves for m in self.members)
        ret = (returns[0] + 1.0 * 0.02) / (returns[1] + 1.0)
        leave = (leaves[0] + 1.0 * 0.02) / (leaves[1] + 1.0)
        return ret, leave
