"""What a job or a sweep shows, served alike by the web pages and the API: a job's output
files, one at a time or as a zip, and its logged metrics; a sweep's runs compared."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

from django.conf import settings
from django.http import FileResponse, Http404, HttpResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header
from zipstream import ZipStream

from . import selectors, staging
from .models import Job, JobState, Sweep


def output_file_response(job: Job, path: str) -> HttpResponse:
    """One kept output file, never anything outside the job's kept outputs. Behind nginx
    the bytes are nginx's to send (X-Accel-Redirect); the caller has checked permissions."""
    file_path = selectors.job_output_path(job, path)
    if file_path is not None and settings.ACCEL_REDIRECT_PREFIX:
        handed = _accel_redirect(file_path)
        if handed is not None:
            return handed
    opened = selectors.open_job_file(job.directory, file_path) if file_path else None
    if opened is None:
        raise Http404("No such output file.")
    return FileResponse(opened, as_attachment=True, filename=file_path.name)


def _accel_redirect(file_path: Path) -> HttpResponse | None:
    """A response with no body that tells nginx which file to send, or None for a file
    outside the jobs folder that nginx serves. nginx refuses symbolic links on that path
    (disable_symlinks), so a file a job swaps for a link after this check is not sent."""
    try:
        relative = file_path.relative_to(Path(settings.JOBS_DIR).resolve())
    except ValueError:
        return None
    response = HttpResponse(content_type="application/octet-stream")
    response["X-Accel-Redirect"] = settings.ACCEL_REDIRECT_PREFIX + quote(relative.as_posix())
    response["Content-Disposition"] = content_disposition_header(True, file_path.name)
    return response


def outputs_zip_response(job: Job) -> StreamingHttpResponse:
    """Every output file in one zip, streamed as it is built (no temporary file)."""
    archive = ZipStream(sized=True)
    for output in selectors.job_output_files(job):
        archive.add_path(str(job.directory / output.path), arcname=output.path)
    response = StreamingHttpResponse(archive, content_type="application/zip")
    response["Content-Length"] = str(len(archive))
    response["Content-Disposition"] = f'attachment; filename="outputs-{job.public_id}.zip"'
    return response


def metrics_payload(job: Job, *, limit: int) -> dict:
    """The job's metrics, downsampled to at most `limit` rows."""
    metrics = selectors.job_metrics(job.directory, staging.job_metrics_path(job))
    return {
        "names": metrics.names,
        "rows": selectors.downsample(metrics.rows, limit),
        "total_rows": len(metrics.rows),
        "skipped_lines": metrics.skipped_lines,
        "is_final": job.is_final,
    }


class SweepComparison(NamedTuple):
    parameter_names: list[str]
    results: selectors.SweepResults
    rows: list[selectors.RunResult]  # filtered and sorted


def sweep_comparison(sweep: Sweep, *, metric: str | None = None, goal: str | None = None,
                     state: str | None = None, sort: str = "index") -> SweepComparison:  # fmt: skip
    """The sweep's runs with their results, filtered by state and sorted by `sort` (index,
    state, final, best, gpu_hours or p.<parameter>; a leading - for descending). A study is
    compared by its objective and direction unless asked otherwise."""
    from .studies import plan_of

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


def csv_cell(value):
    # Parameter values and metric names come from users and jobs: a leading =, +, - or @
    # must not become a spreadsheet formula.
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@"):
        return "'" + value
    return "" if value is None else value


def sweep_results_csv(comparison: SweepComparison) -> str:
    names, results, rows = comparison
    metric = results.metric or "metric"
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([csv_cell(cell) for cell in [
        "index", "job_id", *names, "state", f"final_{metric}", f"best_{metric}", "best_step",
        "gpu_hours", "workstation"]])  # fmt: skip
    for row in rows:
        writer.writerow([csv_cell(cell) for cell in [
            row.run.sweep_index, row.run.public_id,
            *(row.run.parameters.get(name) for name in names), row.run.state, row.final,
            row.best, row.best_step, round(row.gpu_hours, 4), row.run.workstation,
        ]])  # fmt: skip
    return buffer.getvalue()


def sweep_results_payload(comparison: SweepComparison) -> dict:
    names, results, rows = comparison

    def run(row: selectors.RunResult) -> dict:
        return {"id": str(row.run.public_id), "index": row.run.sweep_index,
                "parameters": row.run.parameters, "state": row.run.state, "final": row.final,
                "best": row.best, "best_step": row.best_step,
                "gpu_hours": round(row.gpu_hours, 4),
                "workstation": row.run.workstation}  # fmt: skip

    return {
        "metric": results.metric, "goal": results.goal, "metrics": results.metrics,
        "parameters": names, "best": run(results.best) if results.best else None,
        "runs": [run(row) for row in rows],
    }  # fmt: skip
