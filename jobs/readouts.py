"""What a job shows, served alike by the web pages and the API: its output files, one at a
time or as a zip, and its logged metrics."""

from __future__ import annotations

from collections.abc import Iterator
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


class OutputChanged(Exception):
    """A finished job's output file is no longer what was listed: the zip stops."""


def outputs_zip_response(job: Job) -> StreamingHttpResponse:
    """Every output file in one zip, streamed as it is built (no temporary file). Each file
    is opened as the zip reaches it, never through a link (selectors.open_job_file). A
    finished job's files no longer change, so its zip has a length; a running job's are
    read as they are when reached, and may grow or turn into links meanwhile."""
    sized = job.is_final
    archive = ZipStream(sized=sized)
    for output in selectors.job_output_files(job):
        content = _output_bytes(job, output, exact=sized)
        archive.add(content, arcname=output.path, size=output.size if sized else None)
    response = StreamingHttpResponse(archive, content_type="application/zip")
    if sized:
        response["Content-Length"] = str(len(archive))
    response["Content-Disposition"] = f'attachment; filename="outputs-{job.public_id}.zip"'
    return response


def _output_bytes(job: Job, output: selectors.OutputFile, *, exact: bool) -> Iterator[bytes]:
    opened = selectors.open_job_file(job.directory, job.directory / output.path)
    if opened is None:
        if exact:
            raise OutputChanged(f"{output.path} is gone or is no longer a plain file.")
        return
    left = output.size if exact else None
    with opened:
        while left is None or left > 0:
            chunk = opened.read(ZIP_CHUNK_BYTES if left is None else min(left, ZIP_CHUNK_BYTES))
            if not chunk:
                break
            if left is not None:
                left -= len(chunk)
            yield chunk
    if left:
        raise OutputChanged(f"{output.path} shrank while it was zipped.")


ZIP_CHUNK_BYTES = 1024 * 1024


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
