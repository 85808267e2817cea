"""/api/v1/reports/: the usage report as JSON, and each of its tables as CSV."""

from __future__ import annotations

import csv
import io

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from plumbing.api import ApiError, ErrorSerializer
from plumbing.spreadsheets import stream_csv

from . import reports
from .selectors import export_filename, report_request

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Invalid period or grouping; see fields."),
    401: OpenApiResponse(ErrorSerializer, description="No valid token or session."),
    403: OpenApiResponse(ErrorSerializer, description="Reports are for lab leads and admins."),
    404: OpenApiResponse(ErrorSerializer, description="Not a lab whose reports you can read."),
}
PARAMETERS = [
    OpenApiParameter(
        "period",
        str,
        enum=["7d", "30d", "month", "custom"],
        description="The period; default the last 30 days.",
    ),
    OpenApiParameter("month", str, description="For period=month: YYYY-MM."),
    OpenApiParameter("start", OpenApiTypes.DATE, description="For period=custom: first day."),
    OpenApiParameter("end", OpenApiTypes.DATE, description="For period=custom: last day."),
    OpenApiParameter(
        "group",
        str,
        enum=list(reports.GROUPINGS),
        description="Group by user (default), lab, workstation or GPU model.",
    ),
    OpenApiParameter("lab", str, description="One lab, by id or name; default all you may read."),
]


class ColumnSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="The key of this column in each row.")
    heading = serializers.CharField(help_text="The column's heading, as the page shows it.")


class TableSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The table's name, as in the CSV export's URL.")
    title = serializers.CharField(help_text="What the table shows.")
    note = serializers.CharField(help_text="How a figure is defined, where it needs saying.")
    columns = ColumnSerializer(many=True, source="column_list", help_text="The columns, in order.")
    rows = serializers.ListField(
        child=serializers.DictField(), help_text="One object per row, keyed by column key."
    )


class PeriodSerializer(serializers.Serializer):
    start = serializers.DateTimeField(help_text="Start of the period.")
    end = serializers.DateTimeField(help_text="End of the period (exclusive).")
    label = serializers.CharField(help_text="The period in words.")


class ReportSerializer(serializers.Serializer):
    scope = serializers.CharField(source="scope.label", help_text="Whose usage it covers.")
    period = PeriodSerializer(help_text="The period it covers.")
    group = serializers.CharField(help_text="What the tables are grouped by.")
    totals = serializers.DictField(help_text="Headline figures for the whole scope.")
    tables = serializers.SerializerMethodField(help_text="Every table, by name.")

    @extend_schema_field(serializers.DictField(child=TableSerializer()))
    def get_tables(self, report) -> dict[str, dict]:
        return {name: TableSerializer(report.tables[name]).data for name in reports.TABLES}


def _checked(request: Request):
    form, scope = report_request(request.user, request.query_params)
    if scope is None:
        fields = {name: [str(m) for m in messages] for name, messages in form.errors.items()}
        raise ApiError(
            "The report's parameters are not valid.",
            code="invalid",
            status_code=400,
            field=next(iter(fields), None),
        )
    return form, scope


class ReportView(APIView):
    @extend_schema(
        summary="Usage report", parameters=PARAMETERS, responses={200: ReportSerializer, **ERRORS}
    )
    def get(self, request: Request) -> Response:
        form, scope = _checked(request)
        report = reports.usage_report(scope, form.report_period(), form.cleaned_data["group"])
        return Response(ReportSerializer(report).data)


class CsvRenderer(BaseRenderer):
    """Lets a client ask for text/csv; an error then comes as a one-line CSV as well."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        error = (data or {}).get("error", {}) if isinstance(data, dict) else {}
        buffer = io.StringIO()
        csv.writer(buffer).writerows(
            [["error", "message"], [error.get("code", ""), error.get("message", "")]]
        )
        return buffer.getvalue().encode()


class ReportExportView(APIView):
    renderer_classes = [JSONRenderer, CsvRenderer]

    @extend_schema(
        summary="One report table as CSV (records: every run in the period)",
        parameters=PARAMETERS,
        responses={(200, "text/csv"): OpenApiTypes.STR, **ERRORS},
    )
    def get(self, request: Request, table: str) -> StreamingHttpResponse:
        if table not in (*reports.TABLES, "records"):
            raise ApiError(f"No report table called {table!r}.", code="not_found", status_code=404)
        form, scope = _checked(request)
        period = form.report_period()
        if table == "records":
            rows = reports.usage_records_rows(scope, period)
        else:
            group = form.cleaned_data["group"]
            rows = reports.REPORT_TABLES[table](scope, period, group).csv_rows()
        return stream_csv(rows, export_filename(table, scope, period))
