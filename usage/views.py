"""A job's usage as JSON (its page's charts) and as CSV."""

from __future__ import annotations

import csv

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from jobs.lookups import visible_job_or_404

from . import selectors


@never_cache
@login_required
@require_GET
def job_usage(request: HttpRequest, public_id) -> JsonResponse:
    job = visible_job_or_404(request.user, public_id)
    return JsonResponse(selectors.job_usage_payload(job))


class _Echo:
    def write(self, value: str) -> str:
        return value


@login_required
@require_GET
def job_usage_csv(request: HttpRequest, public_id) -> StreamingHttpResponse:
    job = visible_job_or_404(request.user, public_id)
    columns = ["run_started_at", "workstation", "time", *selectors.SAMPLE_FIELDS, "gpu_source"]
    writer = csv.writer(_Echo())
    rows = (
        [s.run_started_at.isoformat(), s.workstation, s.taken_at.isoformat(),
         *(getattr(s, name) for name in selectors.SAMPLE_FIELDS), s.gpu_source]
        for s in selectors.job_samples(job, limit=10**9)
    )  # fmt: skip
    response = StreamingHttpResponse(
        (writer.writerow(row) for row in [columns, *rows]), content_type="text/csv"
    )
    response["Content-Disposition"] = f'attachment; filename="usage-{job.public_id}.csv"'
    return response
