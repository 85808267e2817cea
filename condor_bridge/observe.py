"""A hook that sees every call the bridge makes to the schedd or the collector: its name,
how long it took and whether it succeeded (the portal turns these into metrics)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Observer = Callable[[str, float, bool], None]
logger = logging.getLogger(__name__)


@contextmanager
def timed(observer: Observer | None, call: str) -> Iterator[None]:
    if observer is None:
        yield
        return
    started = time.perf_counter()
    ok = False
    try:
        yield
        ok = True
    finally:
        try:
            observer(call, time.perf_counter() - started, ok)
        except Exception:  # noqa: BLE001 - watching a call must never break it
            logger.exception("the bridge's observer failed")
