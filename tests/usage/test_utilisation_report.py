"""The utilisation report: how busy the GPUs that jobs held were, for lab leads and admins.

The small campus of tests/campus.py, its jobs measured (through the usage service):
- ada's "big" held 2 GPUs for 3 h (6 GPU-hours), each 25 % busy: 4.5 GPU-hours idle;
- ada's "late" held 1 GPU for 1 h (evicted) and 2 h more, 90 % busy: 0.3 idle;
- bob's "nlp" held 1 GPU for 4 h on a workstation that reported no GPU figures.
"""

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse

from jobs.models import Job
from tests.campus import DAY, PERIOD
from usage.models import UsageSample
from usage.services import usage_summarise


def _sample(job, run_h, at_h, **figures):
    UsageSample.objects.create(
        job=job,
        run_started_at=DAY + timedelta(hours=run_h),
        taken_at=DAY + timedelta(hours=at_h),
        workstation="ws-volta",
        gpu_source="htcondor" if "gpus_busy" in figures else "",
        **figures,
    )


@pytest.fixture
def measured_campus(campus):
    big, late, nlp = (Job.objects.get(name=name) for name in ("big", "late", "nlp"))
    _sample(big, 20, 21, gpus_busy=0.5, gpu_utilization=0.25, memory_peak_mb=3000)
    _sample(big, 20, 22.9, gpus_busy=0.5, gpu_utilization=0.25, memory_peak_mb=3000)
    _sample(late, 21, 21.5, gpus_busy=0.9, gpu_utilization=0.9)
    _sample(late, 23, 24.5, gpus_busy=0.9, gpu_utilization=0.9)
    _sample(nlp, 10, 12, memory_peak_mb=900)
    for job in (big, late, nlp):
        usage_summarise(job, ended_at=job.finished_at)
    return campus


def page(client, user, **query):
    client.force_login(user)
    return client.get(reverse("utilisation:report"), PERIOD | query)


def rows_of(response, table):
    return {
        row["band"] if "band" in row else row.get("group", row.get("user")): row
        for row in response.context["report"].tables[table].rows
    }


def test_an_admin_sees_gpu_hours_by_band_with_worked_figures(client, measured_campus):
    response = page(client, measured_campus["admin"])
    assert response.status_code == 200
    bands = rows_of(response, "bands")
    assert (bands["10–30 %"]["jobs"], bands["10–30 %"]["gpu_hours"]) == (1, 6.0)
    assert bands["10–30 %"]["idle_gpu_hours"] == 4.5
    assert (bands["60–100 %"]["gpu_hours"], bands["60–100 %"]["idle_gpu_hours"]) == (3.0, 0.3)
    assert (bands["not measured"]["jobs"], bands["not measured"]["gpu_hours"]) == (1, 4.0)
    assert bands["0–10 %"]["jobs"] == 0
    assert bands["10–30 %"]["share_percent"] == 46.2
    totals = response.context["report"].totals
    assert (totals["gpu_hours"], totals["idle_gpu_hours"]) == (13.0, 4.8)
    assert totals["utilisation_percent"] == 46.7
    assert b'data-chart="bands"' in response.content
    assert b'id="utilisation-data"' in response.content


def test_idle_gpu_hours_are_given_per_user_and_per_lab(client, measured_campus):
    by_user = rows_of(page(client, measured_campus["admin"]), "idle")
    assert list(by_user) == ["ada", "bob"]
    assert (by_user["ada"]["gpu_hours"], by_user["ada"]["idle_gpu_hours"]) == (9.0, 4.8)
    assert (by_user["ada"]["idle_percent"], by_user["ada"]["utilisation_percent"]) == (53.3, 46.7)
    assert by_user["bob"]["measured_jobs"] == 0 and by_user["bob"]["idle_percent"] is None
    by_lab = rows_of(page(client, measured_campus["admin"], group="lab"), "idle")
    assert by_lab["Vision"]["idle_gpu_hours"] == 4.8 and by_lab["NLP"]["gpu_hours"] == 4.0


def test_the_largest_under_users_are_ranked_by_idle_gpu_hours(client, measured_campus):
    [ada] = page(client, measured_campus["admin"]).context["report"].tables["under_users"].rows
    assert ada["user"] == "ada" and ada["lab"] == "Vision"
    assert (ada["gpus_requested"], ada["gpus_used"], ada["idle_gpu_hours"]) == (3, 2, 4.8)


def test_a_lead_sees_only_their_labs_jobs(client, measured_campus):
    bands = rows_of(page(client, measured_campus["lena"]), "bands")
    assert bands["not measured"]["jobs"] == 0 and bands["10–30 %"]["gpu_hours"] == 6.0
    other = page(client, measured_campus["lena"], lab=str(measured_campus["nlp"].pk))
    assert other.status_code == 404


def test_a_student_may_not_read_it(client, measured_campus):
    assert page(client, measured_campus["ada"]).status_code == 403


def test_each_table_downloads_as_the_csv_of_what_the_page_shows(client, measured_campus):
    client.force_login(measured_campus["admin"])
    response = client.get(reverse("utilisation:export", args=["idle"]), PERIOD)
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][:4] == ["User", "GPU jobs", "Measured", "GPU-hours"]
    assert rows[1][:5] == ["ada", "2", "2", "9.0", "4.8"]
    missing = client.get(reverse("utilisation:export", args=["nothing"]), PERIOD)
    assert missing.status_code == 404
    bad = client.get(reverse("utilisation:export", args=["bands"]), {"period": "month"})
    assert bad.status_code == 400
