"""Checkpoints timed by the workstation against hourly ones, on bench/placement.py's campus.

Run with `make bench-checkpoints` (no database, no pool: a simulation; `--quick` for a few
workstations). Weeks 1 to 3 of bench/placement.py's synthetic owners teach each
workstation's model (forecasts.model.availability, as the portal's nightly fit does); week 4
is held out. In every stretch of week 4 that a workstation is free, a long training job runs
there from the moment the owner leaves (a queue that is never empty) until the owner comes
back, and loses what it did since its last save. That is the worst case: the save at SIGTERM
does not reach the next workstation (spool mode, or a save longer than the grace).

Two policies, each save costing COST_S of the job's time (the helper exits after a save and
HTCondor starts it again at once, so each policy is asked again after every save):
- hourly: a save after every hour of a run (NIGHTSHIFT_CHECKPOINT_INTERVAL_S's default);
- by the workstation: what jobs/runtime/nightshift.py does with what the kit publishes. At
  the start of each run, the forecast row of that quarter hour (the chances of staying free
  2 to 24 hours, as the portal stores them) becomes the mean time to a return and the time
  the owner may be back by (forecasts.model.checkpoints.figures_for_row, as the portal
  computes them); a save at Daly's interval for that mean, and one just before that time.

At equal overhead: the workstation's intervals are scaled by one factor, chosen on week 3 (the
training weeks) so that its saves cost what hourly's cost there; week 4 is reported. The last
line reads `work lost vs hourly: -N %`.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from datetime import UTC, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from placement import START, TICK_S, TICKS_PER_SLOT, ZONE, make_owner, owner_ticks  # noqa: E402

from condor_bridge.placement import STAY_FREE_HOURS  # noqa: E402
from forecasts.model.availability import TAKEN, History, PoolModel, quarter_of_week  # noqa: E402
from forecasts.model.checkpoints import daly_interval_s, figures_for_row  # noqa: E402

COST_S = 60.0
HOURLY_S = 3600.0
WEEK_TICKS = 7 * 86400 // TICK_S


@dataclass
class Tally:
    saves: int = 0
    useful_s: float = 0.0
    lost_s: float = 0.0

    @property
    def overhead_s(self) -> float:
        return self.saves * COST_S

    @property
    def goodput(self) -> float:
        spent = self.useful_s + self.lost_s + self.overhead_s
        return self.useful_s / spent if spent else 1.0


def stretches(present: np.ndarray, week: int) -> list[tuple[int, float, float]]:
    """(workstation, start, end) in seconds from START of every free stretch that begins in
    `week` (0-based) and ends with its owner back before the data ends."""
    found = []
    first, last = week * WEEK_TICKS, (week + 1) * WEEK_TICKS
    for machine, row in enumerate(present):
        free = ~row
        tick = first
        while tick < last:
            if free[tick] and (tick == 0 or not free[tick - 1]):
                end = tick
                while end < len(free) and free[end]:
                    end += 1
                if end < len(free):
                    found.append((machine, tick * TICK_S, end * TICK_S))
                tick = end
            tick += 1
    return found


class Forecasts:
    """Each workstation's checkpoint figures by quarter hour, from its model."""

    def __init__(self, model: PoolModel) -> None:
        self.model = model
        self.cache: dict[tuple[int, int], tuple[int, int | None]] = {}

    def at(self, machine: int, seconds: float) -> tuple[int, int | None]:
        moment = START.astimezone(UTC) + timedelta(seconds=seconds)
        key = (machine, quarter_of_week(moment, ZONE))
        if key not in self.cache:
            workstation = self.model.model(str(machine))
            row = [workstation.stay_free(moment, h).probability for h in STAY_FREE_HOURS]
            self.cache[key] = figures_for_row(STAY_FREE_HOURS, row)
        return self.cache[key]


def run(spans, policy) -> Tally:
    """Each stretch, run by runs: a run saves at the time its policy gives, unless the owner
    comes back first; then all of it since the run began is lost."""
    tally = Tally()
    for machine, start, end in spans:
        now = start
        while True:
            save_at = policy(machine, now)
            if save_at + COST_S > end:
                tally.lost_s += end - now
                break
            tally.useful_s += save_at - now
            tally.saves += 1
            now = save_at + COST_S
    return tally


def hourly(machine: int, now: float) -> float:
    return now + HOURLY_S


def by_workstation(forecasts: Forecasts, scale: float):
    def policy(machine: int, now: float) -> float:
        mean_s, possible_s = forecasts.at(machine, now)
        due = now + scale * daly_interval_s(COST_S, mean_s)
        if possible_s is not None:
            # As the helper: just before the owner may be back, unless that is upon us.
            before = now + possible_s - max(120.0, 2 * COST_S)
            if before > now + 60:
                due = min(due, before)
        return due

    return policy


def equal_overhead_scale(spans, forecasts: Forecasts, saves: int) -> float:
    """The factor on the workstation's intervals that makes its saves as many as `saves`."""
    low, high = 0.05, 50.0
    for _ in range(40):
        middle = (low * high) ** 0.5
        if run(spans, by_workstation(forecasts, middle)).saves > saves:
            low = middle
        else:
            high = middle
    return high


def history(present: np.ndarray, machine: int, until_tick: int) -> History:
    ticks = present[machine, : until_tick - until_tick % TICKS_PER_SLOT]
    slots = ticks.reshape(-1, TICKS_PER_SLOT).any(axis=1)
    return History(start=START.astimezone(UTC), states=np.where(slots, TAKEN, 1).astype(np.int8))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workstations", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="10 workstations (make test)")
    args = parser.parse_args()
    count = 10 if args.quick else args.workstations
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    owners = [make_owner(rng) for _ in range(count)]
    present = owner_ticks(owners, rng)
    histories = {str(m): history(present, m, 3 * WEEK_TICKS) for m in range(count)}
    forecasts = Forecasts(PoolModel.fit(histories, zone=ZONE))
    train, test = stretches(present, 2), stretches(present, 3)

    scale = equal_overhead_scale(train, forecasts, run(train, hourly).saves)
    results = {
        "hourly": run(test, hourly),
        "by the workstation": run(test, by_workstation(forecasts, scale)),
    }
    print(
        f"checkpoints: {count} workstations, week 4 held out ({len(test)} free stretches, "
        f"{sum(e - s for _, s, e in test) / 3600:.0f} h free); a save costs {COST_S:.0f} s; "
        f"intervals scaled by {scale:.2f} for equal overhead on week 3"
    )
    print(f"{'':22s}{'saves':>8s}{'overhead h':>12s}{'work lost h':>13s}{'goodput':>9s}")
    for name, tally in results.items():
        print(
            f"{name:22s}{tally.saves:>8d}{tally.overhead_s / 3600:>12.1f}"
            f"{tally.lost_s / 3600:>13.1f}{tally.goodput:>9.3f}"
        )
    hourly_lost = results["hourly"].lost_s
    ours = results["by the workstation"].lost_s
    change = 100 * (ours / hourly_lost - 1) if hourly_lost else 0.0
    print(f"({time.perf_counter() - started:.0f} s)")
    print(f"work lost vs hourly: {change:+.0f} %")


if __name__ == "__main__":
    main()
