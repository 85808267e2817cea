"""/api/v1/reports/: the same report, with the same permissions, for scripts and the CLI."""

import csv
import io

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from tests.campus import PERIOD
from tests.conftest import client_with_token

pytestmark = pytest.mark.django_db
REPORT = reverse("api:report")


def export_url(table):
    return reverse("api:report-export", args=[table])


def test_a_lead_reads_their_labs_report_as_json(campus):
    body = client_with_token(campus["lena"]).get(REPORT, PERIOD).json()
    assert body["scope"] == "Vision"
    usage = body["tables"]["usage"]
    assert [row["group"] for row in usage["rows"]] == ["ada"]
    assert usage["rows"][0]["gpu_hours"] == 9.0
    assert body["totals"]["gpu_hours"] == 9.0
    assert {c["key"] for c in usage["columns"]} >= {"group", "gpu_hours", "goodput_percent"}


def test_a_lead_cannot_read_or_export_another_labs_report(campus):
    api = client_with_token(campus["lena"])
    other = {**PERIOD, "lab": campus["nlp"].pk}
    assert api.get(REPORT, other).status_code == 404
    for table in ("usage", "over_time", "records"):
        response = api.get(export_url(table), other)
        assert response.status_code == 404, table


def test_a_student_gets_403_and_no_token_gets_401(campus):
    response = client_with_token(campus["ada"]).get(REPORT, PERIOD)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert APIClient().get(REPORT).status_code == 401
    assert APIClient().get(export_url("usage")).status_code == 401


def test_invalid_parameters_are_a_400_naming_the_field(campus):
    response = client_with_token(campus["lena"]).get(REPORT, {"period": "month", "month": "13"})
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"month": [response.json()["error"]["message"]]}


def test_an_admin_exports_every_run_as_csv(campus):
    response = client_with_token(campus["admin"]).get(
        export_url("records"), PERIOD, HTTP_ACCEPT="text/csv"
    )
    assert response.status_code == 200
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][0] == "Job" and len(rows) == 5


def test_an_export_error_asked_for_as_csv_comes_as_csv(campus):
    response = client_with_token(campus["ada"]).get(export_url("usage"), HTTP_ACCEPT="text/csv")
    assert response.status_code == 403
    assert response.content.decode().startswith("error,message")
