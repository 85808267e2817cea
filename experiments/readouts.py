"""A sweep's results as the pages and the API show them: compared, as CSV, as JSON."""

from __future__ import annotations

import csv
import io
from typing import NamedTuple

from jobs.models import JobState
from plumbing.spreadsheets import inert

from . import selectors
from .models import Sweep
from .studies import plan_of


class SweepComparison(NamedTuple):
    parameter_names: list[str]
    results: selectors.SweepResults
    rows: list[selectors.RunResult]  # filtered and sorted


def sweep_comparison(
    sweep: Sweep,
    *,
    metric: str | None = None,
    goal: str | None = None,
    state: str | None = None,
    sort: str = "index",
) -> SweepComparison:
    """The sweep's runs with their results, filtered by state and sorted by `sort` (index,
    state, final, best, gpu_hours or p.<parameter>; a leading - for descending). A study is
    compared by its objective and direction unless asked otherwise."""
    runs = list(selectors.sweep_runs(sweep))
    names = list(runs[0].parameters) if runs else []
    if sweep.is_study:
        plan = plan_of(sweep)
        metric = metric or plan.objective
        goal = goal or ("min" if plan.direction == "minimize" else "max")
    results = selectors.sweep_results(sweep, runs, metric=metric, goal=goal)
    rows = results.results
    if state in JobState.values:
        rows = [row for row in rows if row.run.state == state]
    keys = {
        "index": lambda row: row.run.sweep_index,
        "state": lambda row: row.run.state,
        "final": lambda row: row.final,
        "best": lambda row: row.best,
        "gpu_hours": lambda row: row.gpu_hours,
        **{f"p.{name}": (lambda row, name=name: row.run.parameters.get(name)) for name in names},
    }
    key = keys.get(sort.lstrip("-"))
    if key is not None:
        # Missing values (no metric yet) last, whichever the direction; mixed types as text.
        present = [row for row in rows if key(row) is not None]
        missing = [row for row in rows if key(row) is None]
        try:
            present.sort(key=key, reverse=sort.startswith("-"))
        except TypeError:
            present.sort(key=lambda row: str(key(row)), reverse=sort.startswith("-"))
        rows = present + missing
    return SweepComparison(names, results, rows)


def sweep_results_csv(comparison: SweepComparison) -> str:
    names, results, rows = comparison
    metric = results.metric or "metric"
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        [
            inert(cell)
            for cell in [
                "index",
                "job_id",
                *names,
                "state",
                f"final_{metric}",
                f"best_{metric}",
                "best_step",
                "gpu_hours",
                "workstation",
            ]
        ]
    )
    for row in rows:
        writer.writerow(
            [
                inert(cell)
                for cell in [
                    row.run.sweep_index,
                    row.run.public_id,
                    *(row.run.parameters.get(name) for name in names),
                    row.run.state,
                    row.final,
                    row.best,
                    row.best_step,
                    round(row.gpu_hours, 4),
                    row.run.workstation,
                ]
            ]
        )
    return buffer.getvalue()


def sweep_results_payload(comparison: SweepComparison) -> dict:
    names, results, rows = comparison

    def run(row: selectors.RunResult) -> dict:
        return {
            "id": str(row.run.public_id),
            "index": row.run.sweep_index,
            "parameters": row.run.parameters,
            "state": row.run.state,
            "final": row.final,
            "best": row.best,
            "best_step": row.best_step,
            "gpu_hours": round(row.gpu_hours, 4),
            "workstation": row.run.workstation,
        }

    return {
        "metric": results.metric,
        "goal": results.goal,
        "metrics": results.metrics,
        "parameters": names,
        "best": run(results.best) if results.best else None,
        "runs": [run(row) for row in rows],
    }
