"""What a job shows, served alike by the web pages and the API: its output files, one at a
time or as a zip, and its logged metrics."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.http import FileResponse, Http404, HttpResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header
from zipstream import ZipStream

from . import selectors, staging
from .models import Job


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


def csv_cell(value):
    # Parameter values and metric names come from users and jobs: a leading =, +, - or @
    # must not become a spreadsheet formula.
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@"):
        return "'" + value
    return "" if value is None else value
