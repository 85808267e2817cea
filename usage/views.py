"""A job's usage as JSON (its page's charts) and as CSV; the utilisation reports."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from accounting.selectors import export_filename, report_request
from jobs.web import visible_job_or_404
from plumbing.spreadsheets import invalid_parameters, stream_csv

from . import reports, selectors


@never_cache
@login_required
@require_GET
def job_usage(request: HttpRequest, public_id) -> JsonResponse:
    job = visible_job_or_404(request.user, public_id)
    return JsonResponse(selectors.job_usage_payload(job))


@login_required
@require_GET
def job_usage_csv(request: HttpRequest, public_id) -> StreamingHttpResponse:
    job = visible_job_or_404(request.user, public_id)
    columns = ["run_started_at", "workstation", "time", *selectors.SAMPLE_FIELDS, "gpu_source"]
    rows = (
        [
            s.run_started_at.isoformat(),
            s.workstation,
            s.taken_at.isoformat(),
            *(getattr(s, name) for name in selectors.SAMPLE_FIELDS),
            s.gpu_source,
        ]
        for s in selectors.job_samples(job, limit=10**9)
    )
    return stream_csv([columns, *rows], f"usage-{job.public_id}.csv")


@login_required
def utilisation_page(request: HttpRequest) -> HttpResponse:
    """For lab leads (their labs) and admins (everything): how busy the GPUs jobs held were."""
    form, scope = report_request(request.user, request.GET)
    context = {"form": form, "report": None}
    if scope is not None:
        report = reports.utilisation_report(scope, form.report_period(), form.cleaned_data["group"])
        bands, idle = report.tables["bands"], report.tables["idle"]
        context |= {
            "report": report,
            "tables": list(report.tables.values()),
            "export_query": request.GET.urlencode(),
            "charts": {
                "bands": {
                    "labels": [row["band"] for row in bands.rows],
                    "gpu_hours": [row["gpu_hours"] for row in bands.rows],
                },
                "idle": {
                    "labels": [row["group"] for row in idle.rows],
                    "busy": [
                        round(row["gpu_hours"] - row["idle_gpu_hours"], 3) for row in idle.rows
                    ],
                    "idle": [row["idle_gpu_hours"] for row in idle.rows],
                },
                "energy": {
                    "labels": [row["group"] for row in report.tables["energy"].rows],
                    "kwh": [row["kwh"] or 0 for row in report.tables["energy"].rows],
                },
            },
        }
    return render(request, "usage/utilisation.html", context, status=200 if scope else 400)


@login_required
def utilisation_export(request: HttpRequest, table: str) -> HttpResponse:
    if table not in reports.TABLES:
        raise Http404("No such report table.")
    form, scope = report_request(request.user, request.GET)
    if scope is None:
        return invalid_parameters(form)
    period = form.report_period()
    rows = reports.TABLES[table](scope, period, form.cleaned_data["group"]).csv_rows()
    return stream_csv(rows, export_filename(f"utilisation-{table}", scope, period))
