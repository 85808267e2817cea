"""The figures a workstation publishes for placement (see `condor_bridge.placement`)."""

from __future__ import annotations

from datetime import datetime

from condor_bridge.placement import STAY_FREE_HOURS

from .availability import WorkstationModel


def scores(model: WorkstationModel, at: datetime) -> dict[int, float]:
    """The chances, at `at`, that the workstation stays free for each published duration."""
    return {hours: round(model.stay_free(at, hours).probability, 3) for hours in STAY_FREE_HOURS}
