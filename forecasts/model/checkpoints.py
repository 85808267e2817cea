"""When a job on a workstation should save: an interval from Young and Daly, fed with the
workstation's learnt chance of its owner coming back, and one save before the owner may be
back.

Pure Python (no Django): the portal turns each workstation's forecast into these figures
for its kit (`figures_for_row`), the job helper applies them (jobs/runtime/nightshift.py,
which carries its own copy of `daly_interval_s`: it may import nothing of the portal), and
bench/checkpoints.py measures what they save against hourly saves.

- Young (1974): the interval that minimises lost work plus checkpoint time is about
  sqrt(2 * cost * M), M the mean time between interruptions.
- Daly (2006), first order: sqrt(2 * cost * M) - cost, for cost < 2 M; else M.
- M is the mean time to the owner's return restricted to the forecast's last duration (a
  day): the area under the survival curve. An unrestricted mean, with a tail guessed past
  the last point, made M weeks long for an owner who skips some days, and the saves of the
  morning they did come too rare (bench/checkpoints.py: 25 % less work lost than hourly
  with the restricted mean, none without).
- The owner "may be back" once the chance of it reaches RETURN_CHANCE (1 in 20). That
  threshold was chosen on the training weeks of bench/checkpoints.py's campus (weeks 1-3,
  two seeds; 1 in 2, 1 in 5, 1 in 10 and 1 in 50 did worse there), not on the week it reports.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

# Below and above these a computed interval is clamped: a save every few seconds would be
# all overhead, and one a day too rare to help.
SHORTEST_S = 300.0
LONGEST_S = 6 * 3600.0
RETURN_CHANCE = 0.05


def daly_interval_s(cost_s: float, mean_s: float) -> float:
    """Daly's first-order optimum, clamped to [SHORTEST_S, LONGEST_S]."""
    if cost_s <= 0 or mean_s <= 0:
        raise ValueError("a checkpoint's cost and the mean time to a return are positive")
    interval = mean_s if cost_s >= 2 * mean_s else math.sqrt(2 * cost_s * mean_s) - cost_s
    return min(LONGEST_S, max(SHORTEST_S, interval))


def _curve(survival: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """(seconds, probability) from (hours, probability), from 1 at 0 and never rising."""
    points, lowest = [(0.0, 1.0)], 1.0
    for hours, probability in sorted(survival):
        lowest = min(lowest, max(0.0, float(probability)))
        points.append((hours * 3600.0, lowest))
    return points


def mean_time_to_return_s(survival: Sequence[tuple[float, float]]) -> float:
    """The expected time until the owner comes back, for a workstation free now, counted
    up to the curve's last point: the area under its survival curve (straight lines
    between the points)."""
    stretches = itertools.pairwise(_curve(survival))
    return sum((t2 - t1) * (p1 + p2) / 2 for (t1, p1), (t2, p2) in stretches)


def possible_return_s(survival: Sequence[tuple[float, float]]) -> float | None:
    """How long from now until the owner may be back (the chance of it reaches
    RETURN_CHANCE), or None when it does not within the curve."""
    stay = 1.0 - RETURN_CHANCE
    for (t1, p1), (t2, p2) in itertools.pairwise(_curve(survival)):
        if p2 < stay <= p1:
            return t1 + (t2 - t1) * (p1 - stay) / (p1 - p2)
    return None


def figures_for_row(hours: Sequence[float], row: Sequence[float]) -> tuple[int, int | None]:
    """For one quarter hour of a forecast (its stay-free chances for `hours`): the mean time
    to a return and when the owner may be back, in whole seconds."""
    survival = list(zip(hours, row, strict=True))
    possible = possible_return_s(survival)
    return round(mean_time_to_return_s(survival)), None if possible is None else round(possible)
