"""What a job shows, served alike by the web pages and the API: its output files, one at a
time or as a zip, and its logged metrics."""

from __future__ import annotations

from django.http import FileResponse, Http404, StreamingHttpResponse
from zipstream import ZipStream

from . import selectors, services
from .models import Job


def output_file_response(job: Job, path: str) -> FileResponse:
    """One kept output file, never anything outside the job's kept outputs."""
    file_path = selectors.job_output_path(job, path)
    opened = selectors.open_job_file(job.directory, file_path) if file_path else None
    if opened is None:
        raise Http404("No such output file.")
    return FileResponse(opened, as_attachment=True, filename=file_path.name)


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
    metrics = selectors.job_metrics(job.directory, services.job_metrics_path(job))
    return {
        "names": metrics.names,
        "rows": selectors.downsample(metrics.rows, limit),
        "total_rows": len(metrics.rows),
        "skipped_lines": metrics.skipped_lines,
        "is_final": job.is_final,
    }
