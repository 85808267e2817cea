"""Which workstation a job should prefer, from each one's chance of staying free.

Each workstation publishes, for a few durations, the chance that it stays free that long
from now (`NightshiftStayFree2h` ... `NightshiftStayFree24h` in its machine ad, refreshed by
the execute-node kit's startd cron). A job's submit description ranks on them:

- a long job (at least `LONG_JOB_HOURS`) prefers the workstation most likely to stay free
  for its whole expected runtime;
- a short job prefers, among the workstations that will very likely stay free long enough
  for it, those least likely to stay free for a long job, leaving those to the long jobs.

The negotiator still decides: a rank only orders the workstations a job matches (and the
pool's NEGOTIATOR_PRE_JOB_RANK must not put its own preferences first: see
docs/placement.md). `preference()` is the rank's value in Python, for the benchmark's
simulation; `forecasts.model.placement.scores()` makes the figures a workstation publishes.
"""

from __future__ import annotations

from collections.abc import Mapping

STAY_FREE_HOURS = (2, 4, 8, 16, 24)
LONG_JOB_HOURS = 4.0
# A short job counts a workstation as safe for it above this chance of staying free.
SAFE_FOR_SHORT = 0.9
# The duration a workstation is "wanted by long jobs" for, when a short job picks.
LONG_HORIZON_HOURS = 16


def attribute(hours: int) -> str:
    return f"NightshiftStayFree{hours}h"


def bucket(runtime_hours: float) -> int:
    """The published duration that covers a runtime (the longest one if none does)."""
    for hours in STAY_FREE_HOURS:
        if runtime_hours <= hours:
            return hours
    return STAY_FREE_HOURS[-1]


def rank_expression(runtime_hours: float | None) -> str | None:
    """The submit description's `rank` for a job of this expected runtime; None when the
    job says nothing of its runtime (then it ranks nothing)."""
    if runtime_hours is None:
        return None
    if runtime_hours >= LONG_JOB_HOURS:
        stays = attribute(bucket(runtime_hours))
        return f"ifThenElse(isUndefined({stays}), 0, {stays})"
    safe, wanted = attribute(bucket(runtime_hours)), attribute(LONG_HORIZON_HOURS)
    return (
        f"ifThenElse(isUndefined({safe}) || isUndefined({wanted}), 0, "
        f"2 * ({safe} >= {SAFE_FOR_SHORT}) + 1 - {wanted})"
    )


def preference(published: Mapping[int, float] | None, runtime_hours: float) -> float:
    """`rank_expression`'s value against a workstation's published figures."""
    if not published:
        return 0.0
    if runtime_hours >= LONG_JOB_HOURS:
        return published[bucket(runtime_hours)]
    safe = published[bucket(runtime_hours)] >= SAFE_FOR_SHORT
    return 2 * safe + 1 - published[LONG_HORIZON_HOURS]
