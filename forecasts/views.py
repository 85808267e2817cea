"""A waiting job's predicted start, as JSON for its page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from jobs.lookups import visible_job_or_404

from . import selectors


@never_cache
@login_required
@require_GET
def job_start(request: HttpRequest, public_id) -> JsonResponse:
    job = visible_job_or_404(request.user, public_id)
    return JsonResponse(selectors.job_start_payload(job))
