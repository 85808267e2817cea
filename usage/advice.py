"""Plain advice from what a job used against what it asked for, and the request that fits.

Pure functions of a job's usage summary, so that each rule is tested on its own. Advice
is only given on evidence: a job measured for less than `min_measured_s` (the setting
NIGHTSHIFT_USAGE_ADVICE_MIN_S, a minute by default) says nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from condor_bridge.explain import request_that_fits, size_text

MIN_MEASURED_S = 60
# A GPU busier than this, on average, did real work.
GPU_ACTIVE = 0.05
# Idle for at least this share of the time: the GPU waited for something (data, most often).
GPU_IDLE_WORTH_SAYING = 0.3
# Memory: say so when the peak used less than this share of the request, and a smaller
# request would free at least MEMORY_SLACK_MB.
MEMORY_USED_SHARE = 0.5
MEMORY_SLACK_MB = 1024
CPU_USED_SHARE = 0.5


class MeasuredJob(Protocol):
    measured_s: float
    cpus_requested: int
    memory_requested_mb: int
    gpus_requested: int
    cpus_used: float | None
    memory_peak_mb: float | None
    gpu_utilization: float | None
    gpus_active: int | None
    gpu_idle_share: float | None


@dataclass(frozen=True)
class Advice:
    kind: str  # "gpus", "gpu-idle", "memory", "cpus"
    text: str
    # Form fields the clone button changes: {"gpus": 1}, {"memory_gb": 4.0}.
    adjust: dict = field(default_factory=dict)


def _percent(share: float) -> str:
    return f"{share * 100:.0f} %"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def gpus_used(summary: MeasuredJob) -> int | None:
    """How many of its GPUs the job kept busy: counted per device where the samples say,
    otherwise from the total work (0.35 of one GPU's worth on 4 GPUs: 1)."""
    if summary.gpu_utilization is None:
        return None
    if summary.gpus_active is not None:
        return summary.gpus_active
    busy = summary.gpu_utilization * summary.gpus_requested
    return 0 if busy < GPU_ACTIVE else min(summary.gpus_requested, math.ceil(busy - GPU_ACTIVE))


def advise(summary: MeasuredJob, *, min_measured_s: float = MIN_MEASURED_S) -> list[Advice]:
    if summary.measured_s < min_measured_s:
        return []
    advice: list[Advice] = []
    asked = summary.gpus_requested
    used = gpus_used(summary)
    if asked and used is not None:
        busy = summary.gpu_utilization * asked
        if used == 0:
            advice.append(
                Advice(
                    "gpus",
                    (
                        f"You asked for {_plural(asked, 'GPU')} and none did any work: does the "
                        "script put its model on the GPU (torch.cuda.is_available())?"
                    ),
                    {"gpus": 0},
                )
            )
        elif used < asked:
            advice.append(
                Advice(
                    "gpus",
                    (
                        f"You asked for {_plural(asked, 'GPU')} and used {used}, at "
                        f"{_percent(busy / used)} on average."
                    ),
                    {"gpus": used},
                )
            )
        idle = summary.gpu_idle_share
        if used and idle is not None and idle >= GPU_IDLE_WORTH_SAYING:
            advice.append(
                Advice(
                    "gpu-idle",
                    (
                        f"The GPU was idle {_percent(idle)} of the time: is data loading the "
                        "bottleneck? More DataLoader workers (num_workers), pin_memory=True or a "
                        "dataset on the workstation's cache often help."
                    ),
                )
            )
    peak, requested = summary.memory_peak_mb, summary.memory_requested_mb
    if peak is not None and requested:
        fits = request_that_fits(peak)
        if peak < requested * MEMORY_USED_SHARE and requested - fits >= MEMORY_SLACK_MB:
            advice.append(
                Advice(
                    "memory",
                    (
                        f"You asked for {size_text(requested)} of memory; the peak was "
                        f"{size_text(peak)}. {size_text(fits)} would do."
                    ),
                    {"memory_gb": fits / 1024},
                )
            )
    cpus = summary.cpus_used
    wanted = summary.cpus_requested
    if cpus is not None and wanted >= 2 and cpus < wanted * CPU_USED_SHARE:
        fits = max(1, math.ceil(cpus * 1.25))
        if fits < wanted:
            advice.append(
                Advice(
                    "cpus",
                    (f"You asked for {wanted} CPUs and kept {cpus:.1f} busy on average."),
                    {"cpus": fits},
                )
            )
    return advice


def clone_adjustments(advice: list[Advice]) -> dict:
    """Every change the advice suggests, for one clone button."""
    adjust: dict = {}
    for item in advice:
        adjust.update(item.adjust)
    return adjust
