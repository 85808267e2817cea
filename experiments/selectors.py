"""Reading experiments: which sweeps a user may see, their runs, and their results."""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.db.models import Count, F, QuerySet, Sum

from accounting.models import UsageRecord
from condor_bridge.submit import METRICS_FILE
from jobs.models import FINAL_STATES, Job
from jobs.selectors import job_metrics, visible_to

from .models import Sweep


def sweep_list_visible_to(user) -> QuerySet[Sweep]:
    """Every sweep a user may read, by the same rule as jobs."""
    return visible_to(user, Sweep.objects.select_related("lab", "owner"))


def sweep_get_visible(user, public_id) -> Sweep:
    """A sweep the user may read; Sweep.DoesNotExist for any other."""
    return sweep_list_visible_to(user).get(public_id=public_id)


def sweep_stage(sweep: Sweep) -> str:
    """Where a sweep is on its way to HTCondor: "writing" its runs, "submitting" them (or
    "retrying" after an error), "filling" the folders of runs HTCondor holds until they are
    ready, "submitted", or "stopped" short of it (cancelled or failed)."""
    if sweep.is_submitted:
        return "filling" if sweep.is_filling_folders else "submitted"
    if sweep.is_preparing:
        return "writing"
    if not sweep.runs.exclude(state__in=FINAL_STATES).exists():
        return "stopped"
    return "retrying" if sweep.last_error else "submitting"


def sweep_runs(sweep: Sweep) -> QuerySet[Job]:
    """A sweep's runs in their order."""
    return sweep.runs.order_by("sweep_index").select_related("lab", "owner")


# What the API says of each run of a sweep (experiments.api.serializers.SweepRunSerializer).
RUN_SUMMARY_FIELDS = (
    "public_id",
    "sweep_index",
    "parameters",
    "state",
    "status_detail",
    "exit_code",
    "workstation",
    "cluster_id",
    "proc_id",
    "started_at",
    "finished_at",
    "sweep",
)


def sweep_run_summaries(sweep: Sweep) -> QuerySet[Job]:
    """A sweep's runs in their order, with only what a summary of each shows: a sweep of
    ten thousand runs is read in a fraction of the time."""
    return sweep.runs.order_by("sweep_index").only(*RUN_SUMMARY_FIELDS)


def sweep_state_counts(sweep: Sweep) -> dict[str, int]:
    """How many of its runs are in each state."""
    rows = sweep.runs.values("state").annotate(count=Count("id")).order_by()
    return {row["state"]: row["count"] for row in rows}


@dataclass(frozen=True)
class RunResult:
    """One run of a sweep, as the comparison table shows it."""

    run: Job
    final: float | None  # the chosen metric at the run's last step that logged it
    best: float | None  # its best value over the run
    best_step: float | None
    gpu_hours: float


@dataclass(frozen=True)
class SweepResults:
    metrics: list[str]  # every metric any run logged
    metric: str | None  # the one compared
    goal: str  # "min" or "max"
    results: list[RunResult]
    best: RunResult | None


def default_goal(metric: str) -> str:
    """Losses and errors are minimised; anything else (accuracy, reward) maximised."""
    lowered = metric.lower()
    return "min" if any(word in lowered for word in ("loss", "err", "perplexity")) else "max"


def metric_series(rows: list[dict], name: str) -> list[tuple[int, float]]:
    """(step, value) of one logged metric, in the order logged: numbers only (no booleans,
    no NaN or infinity, which no comparison ranks)."""
    return [
        (row["step"], row[name])
        for row in rows
        if isinstance(row.get(name), int | float)
        and not isinstance(row.get(name), bool)
        and math.isfinite(row[name])
    ]


def final_and_best(
    series: list[tuple[int, float]], goal: str
) -> tuple[float | None, int | None, float | None]:
    """The last value, and the step and value of the best (the lowest for "min")."""
    if not series:
        return None, None, None
    step, best = (min if goal == "min" else max)(series, key=lambda item: item[1])
    return series[-1][1], step, best


def sweep_results(
    sweep: Sweep, runs: list[Job], *, metric: str | None = None, goal: str | None = None
) -> SweepResults:
    """Each run's final and best value of one metric (nightshift.log), and its GPU-hours.

    The metric defaults to the first one any run logged; the goal to what its name says.
    """
    hours: dict[int, float] = {}
    for row in (
        UsageRecord.objects.filter(job__sweep=sweep)
        .values("job_id")
        .annotate(gpu_seconds=Sum(F("wall_s") * F("gpus")))
    ):
        hours[row["job_id"]] = (row["gpu_seconds"] or 0.0) / 3600
    logged = {run.pk: job_metrics(run.directory, run.directory / METRICS_FILE) for run in runs}
    names: dict[str, None] = {}
    for metrics in logged.values():
        for name in metrics.names:
            names.setdefault(name)
    chosen = metric if metric in names else next(iter(names), None)
    goal = goal if goal in ("min", "max") else default_goal(chosen or "")
    better = min if goal == "min" else max
    results = []
    for run in runs:
        series = metric_series(logged[run.pk].rows, chosen) if chosen is not None else []
        final, best_step, best = final_and_best(series, goal)
        results.append(RunResult(run, final, best, best_step, hours.get(run.pk, 0.0)))
    scored = [result for result in results if result.best is not None]
    top = better(scored, key=lambda result: result.best) if scored else None
    return SweepResults(list(names), chosen, goal, results, top)
