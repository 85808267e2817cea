from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.urls import reverse

from labs.selectors import lab_managed_or_404
from labs.services import MembershipError, lab_member_add
from plumbing.panels import panels_for
from plumbing.spreadsheets import invalid_parameters, stream_csv

from . import reports
from .selectors import export_filename, lab_member_usage, report_request


def chart_data(report: reports.Report) -> dict:
    """What the charts draw: the report's own tables, reshaped for Chart.js."""
    over_time = report.tables["over_time"].rows
    totals: dict[str, float] = {}
    for row in over_time:
        totals[row["group"]] = totals.get(row["group"], 0) + row["gpu_hours"]
    top = sorted(totals, key=lambda name: -totals[name])[: reports.STACKED_GROUPS]
    buckets = sorted({row["bucket"] for row in over_time})
    series: dict[str, dict[str, float]] = {name: {} for name in top}
    if len(totals) > len(top):
        series["others"] = {}
    for row in over_time:
        name = row["group"] if row["group"] in top else "others"
        series[name][row["bucket"]] = series[name].get(row["bucket"], 0) + row["gpu_hours"]
    waits = report.tables["waits"].rows
    return {
        "over_time": {
            "labels": buckets,
            "series": [
                {"name": name, "values": [round(values.get(b, 0), 3) for b in buckets]}
                for name, values in series.items()
            ],
        },
        "outcomes": {
            "labels": [row["group"] for row in report.tables["outcomes"].rows],
            "series": [
                {"name": label, "values": [row[key] for row in report.tables["outcomes"].rows]}
                for key, label in reports.OUTCOMES
            ],
        },
        "waits": {
            "labels": [label for label, _ in reports.WAIT_BUCKETS],
            "values": [waits[0][f"b{i}"] for i in range(len(reports.WAIT_BUCKETS))]
            if waits
            else [],
        },
        "losses": {
            "labels": [row["group"] for row in report.tables["losses"].rows],
            "committed": [row["committed_gpu_hours"] for row in report.tables["losses"].rows],
            "lost": [row["badput_gpu_hours"] for row in report.tables["losses"].rows],
        },
        **{
            name: {
                "labels": [row[key] for row in report.tables[name].rows],
                "utilization": [row["utilization_percent"] for row in report.tables[name].rows],
                "harvest": [row["harvest_percent"] for row in report.tables[name].rows],
            }
            for name, key in (("utilization_hour", "hour"), ("utilization_weekday", "weekday"))
        },
    }


@login_required
def reports_page(request: HttpRequest) -> HttpResponse:
    """Usage reports for lab leads (their labs) and admins (everything)."""
    form, scope = report_request(request.user, request.GET)
    context = {"form": form, "report": None}
    if scope is not None:
        report = reports.usage_report(scope, form.report_period(), form.cleaned_data["group"])
        query = request.GET.urlencode()
        context |= {
            "report": report,
            "tables": [report.tables[name] for name in reports.TABLES],
            "charts": chart_data(report),
            "export_query": query,
            "time_zone": settings.TIME_ZONE,
            "records_url": reverse("accounting:export", args=["records"]) + f"?{query}",
        }
    return render(request, "accounting/reports.html", context, status=200 if scope else 400)


@login_required
def report_export(request: HttpRequest, table: str) -> HttpResponse | StreamingHttpResponse:
    """One report table as CSV, or ("records") every run in the period, streamed."""
    if table not in (*reports.TABLES, "records"):
        raise Http404("No such report table.")
    form, scope = report_request(request.user, request.GET)
    if scope is None:
        return invalid_parameters(form)
    period = form.report_period()
    if table == "records":
        rows = reports.usage_records_rows(scope, period)
    else:
        report_table = reports.REPORT_TABLES[table](scope, period, form.cleaned_data["group"])
        rows = report_table.csv_rows()
    return stream_csv(rows, export_filename(table, scope, period))


@login_required
def lab_detail(request: HttpRequest, lab_id: int) -> HttpResponse:
    """For a lab's leads: its members, their use of the quota, and adding or removing them."""
    lab = lab_managed_or_404(request.user, lab_id)
    if request.method == "POST":
        try:
            membership = lab_member_add(
                lab=lab, who=request.POST.get("who", ""), actor=request.user
            )
        except MembershipError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"Added {membership.user.get_username()} to {lab.name}.")
        return redirect("labs:detail", lab_id=lab.pk)
    return render(
        request,
        "labs/detail.html",
        {
            "lab": lab,
            "members": lab_member_usage(lab),
            "panels": panels_for("lab", lab=lab),
        },
    )
