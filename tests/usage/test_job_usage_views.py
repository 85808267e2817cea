"""The job page's usage section, its JSON and its CSV."""

import csv
import io

import pytest
from django.urls import reverse

from tests.usage.helpers import finished_job, running_job


@pytest.mark.django_db
def test_the_owner_reads_a_running_jobs_samples_as_json(student_client, student, fake_bridge):
    job = running_job(student, fake_bridge, memory_mb=700, gpus_used=0.5)
    body = student_client.get(reverse("usage:json", args=[job.public_id])).json()
    assert body["is_final"] is False and body["summary"] is None and body["advice"] == []
    [run] = body["runs"]
    assert run["workstation"] == "ws-ampere"
    assert run["samples"][0]["memory_mb"] == 700
    assert run["samples"][0]["gpu_utilization"] == 0.5
    assert body["requested"]["gpus"] == 1


@pytest.mark.django_db
def test_a_finished_jobs_page_shows_its_summary_advice_and_a_clone_button_that_applies_it(
    student_client, student, fake_bridge
):
    job = finished_job(student, fake_bridge)
    page = student_client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert 'data-role="usage"' in page
    assert "peak 1536 MB of the 8192 MB asked for" in page
    assert "You asked for 2 GPUs and used 1, at 70 % on average." in page
    assert "You asked for 8 GB of memory; the peak was 1.5 GB. 2.5 GB would do." in page
    assert "You asked for 4 CPUs and kept 0.9 busy on average." in page
    clone = reverse("jobs:new") + f"?from={job.public_id}&amp;gpus=1&amp;memory_gb=2.5&amp;cpus=2"
    assert f'href="{clone}"' in page


@pytest.mark.django_db
def test_the_clone_button_fills_the_form_with_the_advice(student_client, student, fake_bridge):
    job = finished_job(student, fake_bridge)
    url = reverse("jobs:new") + f"?from={job.public_id}&gpus=1&memory_gb=2.5&cpus=2"
    form = student_client.get(url).context["form"]
    assert (form.initial["gpus"], form.initial["memory_gb"], form.initial["cpus"]) == (1, 2.5, 2)
    assert form.initial["name"] == "train"


@pytest.mark.django_db
def test_a_clone_link_with_hostile_values_fills_in_only_the_request_as_it_was(
    student_client, student, fake_bridge
):
    job = finished_job(student, fake_bridge)
    url = (
        reverse("jobs:new") + f"?from={job.public_id}&gpus=1;rm&memory_gb=nan&cpus=-3&name=<script>"
    )
    response = student_client.get(url)
    assert response.status_code == 200
    form = response.context["form"]
    assert (form.initial["gpus"], form.initial["memory_gb"], form.initial["cpus"]) == (2, 8, 4)
    assert form.initial["name"] == "train"


@pytest.mark.django_db
def test_another_student_cannot_read_a_jobs_usage(client, other_student, student, fake_bridge):
    job = running_job(student, fake_bridge, memory_mb=10)
    client.force_login(other_student)
    assert client.get(reverse("usage:json", args=[job.public_id])).status_code == 404
    assert client.get(reverse("usage:csv", args=[job.public_id])).status_code == 404


@pytest.mark.django_db
def test_the_csv_has_one_row_per_sample(student_client, student, fake_bridge):
    job = finished_job(student, fake_bridge)
    response = student_client.get(reverse("usage:csv", args=[job.public_id]))
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][:4] == ["run_started_at", "workstation", "time", "cpus"]
    assert len(rows) == 1 + 3  # two samples while it ran and the final ad
    assert rows[-1][-1] == "htcondor"


@pytest.mark.django_db
def test_a_gpu_job_on_a_workstation_without_gpu_figures_says_they_were_not_measured(
    student_client, student, fake_bridge
):
    job = finished_job(student, fake_bridge, gpus_used=None, gpu_memory_peak_mb=None)
    page = student_client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert "not measured: this workstation reports no GPU figures" in page
    assert "GPUs and used" not in page
