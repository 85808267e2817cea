"""Nightshift's adapter to HTCondor. Pure Python: it imports no Django.

Only `condor_bridge.schedd` and `.calls` (its failures and retries) import htcondor2;
everything else here is pure and unit-tested on its own.
"""

from .matching import MatchSummary, machine_fits, summarize_matches
from .states import map_job_ad, workstation_of
from .submit import build_submit_description
from .types import (
    BridgeError,
    FileMode,
    GpuModel,
    InvalidJobRequest,
    JobObservation,
    JobRequest,
    JobState,
    JobUsage,
    LendingTerms,
    PoolMachine,
    SubmitResult,
    made,
)

__all__ = [
    "BridgeError",
    "FileMode",
    "GpuModel",
    "InvalidJobRequest",
    "JobObservation",
    "JobRequest",
    "JobState",
    "JobUsage",
    "LendingTerms",
    "MatchSummary",
    "PoolMachine",
    "SubmitResult",
    "build_submit_description",
    "machine_fits",
    "made",
    "map_job_ad",
    "summarize_matches",
    "workstation_of",
]
