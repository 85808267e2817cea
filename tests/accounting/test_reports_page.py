"""/reports/: what lab leads and admins see, and that every number is the one worked out."""

import csv
import io

import pytest
from django.urls import reverse

from tests.campus import PERIOD

pytestmark = pytest.mark.django_db
URL = reverse("accounting:reports")


def report_as(client, user, **query):
    client.force_login(user)
    return client.get(URL, {**PERIOD, **query})


def table(response, name):
    return {t.name: t for t in response.context["tables"]}[name]


def by_group(response, name):
    return {row["group"]: row for row in table(response, name).rows}


def test_a_lab_lead_sees_their_labs_users_and_nobody_elses(client, campus):
    response = report_as(client, campus["lena"])
    assert response.status_code == 200
    usage = by_group(response, "usage")
    assert list(usage) == ["ada"]
    # 2 GPUs x 3 h + 1 GPU x 1 h evicted + 1 GPU x 2 h (the part before midnight counts too).
    assert usage["ada"]["gpu_hours"] == 9.0
    assert (usage["ada"]["runs"], usage["ada"]["jobs"], usage["ada"]["evictions"]) == (3, 2, 1)
    assert usage["ada"]["badput_gpu_hours"] == 1.0
    assert usage["ada"]["goodput_percent"] == round(100 * 8 / 9, 1)
    assert b"bob" not in response.content


def test_runs_that_cross_midnight_are_split_between_the_two_days(client, campus):
    response = report_as(client, campus["lena"])
    days = {
        (row["bucket"], row["group"]): row["gpu_hours"] for row in table(response, "over_time").rows
    }
    assert days == {("2026-11-02", "ada"): 8.0, ("2026-11-03", "ada"): 1.0}


def test_an_admin_sees_every_lab_and_can_group_by_lab(client, campus):
    response = report_as(client, campus["admin"], group="lab")
    usage = by_group(response, "usage")
    assert {name: row["gpu_hours"] for name, row in usage.items()} == {"Vision": 9.0, "NLP": 4.0}
    assert response.context["report"].totals["gpu_hours"] == 13.0
    # Grouped by lab, the losses table is the same query's rows, shown as losses.
    assert table(response, "usage").title == "GPU-hours by lab"
    assert by_group(response, "losses")["Vision"]["badput_gpu_hours"] == 1.0


def test_outcomes_count_how_each_job_ended(client, campus):
    outcomes = by_group(report_as(client, campus["admin"]), "outcomes")
    assert (outcomes["ada"]["completed"], outcomes["ada"]["cancelled"]) == (1, 1)
    assert outcomes["bob"]["runtime_limit"] == 1
    assert outcomes["ada"]["success_percent"] == 50.0


def test_queue_waits_give_the_median_and_90th_percentile_of_first_starts(client, campus):
    waits = by_group(report_as(client, campus["admin"]), "waits")
    # First starts waited 5, 30 and 120 minutes; a restart after an eviction is not a first.
    assert list(waits) == ["All", "ada", "bob"]
    assert (waits["All"]["starts"], waits["ada"]["starts"], waits["bob"]["starts"]) == (3, 2, 1)
    assert waits["All"]["median_minutes"] == 30.0
    assert waits["All"]["p90_minutes"] == 102.0  # 30 + 0.8 x (120 - 30)
    # 5 min falls in "5–15 min", 30 in "15–60 min", 120 in "1–4 h".
    assert [waits["All"][f"b{i}"] for i in range(7)] == [0, 0, 1, 1, 1, 0, 0]


def test_eviction_losses_and_goodput_are_shown_by_lab(client, campus):
    losses = by_group(report_as(client, campus["admin"]), "losses")
    assert losses["Vision"]["badput_gpu_hours"] == 1.0
    assert losses["NLP"]["goodput_percent"] == 100.0


def test_utilization_and_harvest_come_from_the_capacity_samples(client, campus):
    response = report_as(client, campus["admin"])
    hours = {row["hour"]: row for row in table(response, "utilization_hour").rows}
    assert (hours["21:00"]["utilization_percent"], hours["21:00"]["harvest_percent"]) == (100, 100)
    # At 22:00 one GPU was idle and the other's owner was back: nothing used, 1 available.
    assert (hours["22:00"]["utilization_percent"], hours["22:00"]["harvest_percent"]) == (0, 0)
    assert hours["03:00"]["utilization_percent"] is None  # never sampled
    days = {row["weekday"]: row for row in table(response, "utilization_weekday").rows}
    assert days["Mon"]["total"] == 4.0 and days["Mon"]["nightshift"] == 2.0


def test_the_page_has_a_chart_and_a_table_with_a_csv_link_for_each_figure(client, campus):
    body = report_as(client, campus["lena"]).content.decode()
    for name in (
        "over_time",
        "outcomes",
        "waits",
        "losses",
        "utilization_hour",
        "utilization_weekday",
    ):
        assert f'data-chart="{name}"' in body
        assert f'data-table="{name}"' in body
        assert reverse("accounting:export", args=[name]) in body
    assert 'id="report-data"' in body and "chart.umd.min.js" in body


def test_a_lead_asking_for_another_labs_report_gets_a_404(client, campus):
    response = report_as(client, campus["lena"], lab=campus["nlp"].pk)
    assert response.status_code == 404


def test_a_student_who_leads_no_lab_may_not_read_reports(client, campus):
    assert report_as(client, campus["ada"]).status_code == 403


def test_signing_in_is_required(client, campus):
    response = client.get(URL)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.parametrize(
    "query, field, message",
    [
        ({"period": "month", "month": "2026-13"}, "month", "YYYY-MM"),
        ({"period": "month", "month": "2999-01"}, "month", "not begun"),
        ({"period": "custom", "start": "2026-11-05", "end": "2026-11-01"}, "end", "ends before"),
        ({"period": "custom", "start": "2026-11-05"}, "end", "both dates"),
        ({"group": "user; DROP TABLE jobs_job"}, "group", "valid choice"),
        ({"period": "'; SELECT 1 --"}, "period", "valid choice"),
    ],
)
def test_bad_parameters_are_explained_on_the_form(client, campus, query, field, message):
    client.force_login(campus["lena"])
    response = client.get(URL, query)
    assert response.status_code == 400
    assert message in " ".join(response.context["form"].errors[field])


def test_a_month_report_covers_that_calendar_month(client, campus):
    response = report_as(client, campus["lena"], period="month", month="2026-11")
    assert by_group(response, "usage")["ada"]["gpu_hours"] == 9.0
    assert response.context["report"].period.label == "November 2026"


def test_a_table_exports_as_csv_with_the_same_numbers(client, campus):
    client.force_login(campus["lena"])
    response = client.get(reverse("accounting:export", args=["usage"]), PERIOD)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][:2] == ["User", "GPU-hours"]
    assert rows[1][:2] == ["ada", "9.0"]


def test_every_run_exports_as_one_csv_row(client, campus):
    client.force_login(campus["admin"])
    response = client.get(reverse("accounting:export", args=["records"]), PERIOD)
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 1 + 4
    assert sorted(row[1] for row in rows[1:]) == ["ada", "ada", "ada", "bob"]


def test_a_lead_cannot_export_another_labs_table(client, campus):
    client.force_login(campus["lena"])
    for name in ("usage", "records"):
        url = reverse("accounting:export", args=[name])
        assert client.get(url, {**PERIOD, "lab": campus["nlp"].pk}).status_code == 404


def test_an_unknown_table_is_a_404(client, campus):
    client.force_login(campus["admin"])
    assert client.get(reverse("accounting:export", args=["secrets"])).status_code == 404


def test_the_report_and_the_quota_count_the_same_gpu_hours(client, campus):
    from accounting.models import UsageRecord
    from accounting.selectors import gpu_hours_used

    response = report_as(client, campus["admin"])
    period = response.context["report"].period
    for user in ("ada", "bob"):
        used = gpu_hours_used(
            UsageRecord.objects.filter(user=campus[user]), since=period.start, until=period.end
        )
        assert by_group(response, "usage")[user]["gpu_hours"] == pytest.approx(used.total)


def test_text_a_spreadsheet_would_run_as_a_formula_is_exported_as_text(client, campus):
    campus["vision"].name = '=HYPERLINK("http://evil.example","x")'
    campus["vision"].save()
    client.force_login(campus["admin"])
    response = client.get(reverse("accounting:export", args=["usage"]), {**PERIOD, "group": "lab"})
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert '\'=HYPERLINK("http://evil.example","x")' in [row[0] for row in rows]


def test_an_export_with_bad_parameters_says_what_is_wrong(client, campus):
    client.force_login(campus["lena"])
    response = client.get(reverse("accounting:export", args=["usage"]), {"period": "month"})
    assert response.status_code == 400
    assert "month: Choose a month." in response.content.decode()


@pytest.mark.parametrize(
    "hostile",
    ["' OR 1=1 --", "Vision\x00", "../NLP", "1; DROP TABLE labs_lab", "\u202eVision", "x" * 500],
)
def test_a_hostile_lab_value_is_no_lab_of_yours(client, campus, hostile):
    assert report_as(client, campus["lena"], lab=hostile).status_code == 404


def test_a_lab_can_be_named_instead_of_numbered(client, campus):
    response = report_as(client, campus["lena"], lab="vision")
    assert response.context["report"].scope.label == "Vision"
    assert report_as(client, campus["lena"], lab="NLP").status_code == 404
