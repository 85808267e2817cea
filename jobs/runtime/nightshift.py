"""Nightshift's job helper: metrics that the job page plots while the job runs.

    import nightshift
    for step in range(100):
        ...
        nightshift.log(step=step, loss=loss, accuracy=accuracy)

Each call appends one JSON line, e.g. {"step": 3, "loss": 0.42, "accuracy": 0.8}, to the
file named by NIGHTSHIFT_METRICS_FILE. Nightshift puts this module on PYTHONPATH
(NIGHTSHIFT_HELPER_DIR) of every job. It needs nothing but the standard library, and it
works outside Nightshift too (it then writes ./metrics.jsonl).
"""

from __future__ import annotations

import json
import math
import os
import time

__all__ = ["log", "metrics_path"]

_path = os.path.abspath(os.environ.get("NIGHTSHIFT_METRICS_FILE", "metrics.jsonl"))
_next_step = 0


def metrics_path() -> str:
    return _path


def log(step: int | None = None, **metrics: float) -> None:
    """Record numeric metrics for one step. Without `step`, steps count up from 0."""
    global _next_step
    if step is None:
        step = _next_step
    if isinstance(step, bool) or not isinstance(step, int):
        raise TypeError("step must be a whole number")
    row: dict[str, float | int | None] = {"step": step}
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            try:
                value = float(value)  # numpy and torch scalars
            except (TypeError, ValueError):
                raise TypeError(f"metric {name!r} must be a number, not {value!r}") from None
        row[name] = value if math.isfinite(value) else None
    row["time"] = round(time.time(), 3)
    _next_step = step + 1
    os.makedirs(os.path.dirname(_path), exist_ok=True)
    with open(_path, "a", encoding="utf-8") as stream:
        stream.write(json.dumps(row) + "\n")
