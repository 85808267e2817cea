"""Timing shared by the benchmarks."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable


def median_ms(action: Callable[[], object], repeats: int) -> float:
    """The median of `repeats` runs of `action`, in milliseconds, after one warm-up run."""
    action()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def samples_ms(action: Callable[[], object], repeats: int) -> list[float]:
    """`repeats` timings of `action` in milliseconds, after one warm-up run."""
    action()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return times


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile: the value at or below which `fraction` of them lie."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))]


class CollectorTime:
    """Seconds the cycle collector ran in this process while the block ran (gc.callbacks),
    and how many of its collections were full ones."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._started = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._started
        self.full += info["generation"] == 2

    def __enter__(self) -> CollectorTime:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc_info) -> None:
        gc.callbacks.remove(self._callback)
