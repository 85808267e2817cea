"""Python's cycle collector, kept off the work where it walks the same objects again and again.

CPython frees most objects by reference counting; its cycle collector walks every object it
tracks in a full collection, and starts one whenever the objects that outlived the younger
collections have grown by a quarter. Work that makes many objects which outlive it (a
sweep's 10,000 runs, a sync cycle's changed rows) starts several full collections, each
walking everything the process holds: at 100,000 active jobs, a third of a second each,
0.6 of the 3.8 s a sync cycle with 10,000 changes took, and 0.8 s of a 10,000-run sweep
(docs/benchmarks.md). Reference counting still frees what such work drops; only cycles of
garbage wait, for a collection after it.
"""

from __future__ import annotations

import gc
import threading
from contextlib import ContextDecorator

_lock = threading.Lock()
_pauses = 0
_enabled_before = False


class collector_paused(ContextDecorator):  # noqa: N801 (used as a decorator, like a function)
    """No automatic cycle collection inside (also as a decorator). Pauses that overlap, in
    one thread or several, keep it off until the last ends; it is turned on again only if it
    was on when the first began."""

    def __enter__(self) -> collector_paused:
        global _pauses, _enabled_before
        with _lock:
            if _pauses == 0:
                _enabled_before = gc.isenabled()
                gc.disable()
            _pauses += 1
        return self

    def __exit__(self, *exc_info) -> bool:
        global _pauses
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _enabled_before:
                gc.enable()
        return False


class KeptBetweenRuns:
    """For a task that keeps large caches between its runs (the sync's rows and
    observations, one instance per process): after each run, the objects it made are
    collected once, young, and what is left alive is moved out of the collector's sight
    (`gc.freeze`), so that the next run's collections walk only that run's objects. A cycle
    among frozen objects that later becomes garbage would never be freed, so every
    `full_every` runs everything is brought back and collected once, fully."""

    def __init__(self, *, full_every: int) -> None:
        if full_every < 1:
            raise ValueError("full_every must be at least 1")
        self.full_every = full_every
        self._runs = 0

    def run_done(self) -> None:
        self._runs += 1
        if self._runs % self.full_every == 0:
            gc.unfreeze()
            gc.collect()
        else:
            gc.collect(1)
        gc.freeze()
