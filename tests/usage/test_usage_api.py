"""/api/v1/jobs/<id>/usage/: a job's samples, summary and advice for scripts."""

import pytest

from tests.usage.helpers import finished_job


@pytest.mark.django_db
def test_the_api_gives_a_finished_jobs_summary_and_advice(api, student, fake_bridge):
    job = finished_job(student, fake_bridge)
    body = api.get(f"/api/v1/jobs/{job.public_id}/usage/").json()
    assert body["is_final"] is True
    summary = body["summary"]
    assert summary["memory_peak_mb"] == 1536 and summary["gpus_used"] == 1
    assert summary["gpu_utilization"] == pytest.approx(0.35)
    assert summary["gpu_hours"] == pytest.approx(1.0)
    assert {item["kind"] for item in body["advice"]} == {"gpus", "memory", "cpus"}
    assert body["clone_url"].startswith(f"/jobs/new/?from={job.public_id}&gpus=1")
    assert [len(run["samples"]) for run in body["runs"]] == [3]


@pytest.mark.django_db
def test_another_users_job_usage_is_not_found(other_api, student, fake_bridge):
    job = finished_job(student, fake_bridge)
    response = other_api.get(f"/api/v1/jobs/{job.public_id}/usage/")
    assert response.status_code == 404


def test_the_api_wants_a_token(anonymous_api):
    response = anonymous_api.get("/api/v1/jobs/6f1c3a52-8d7e-4c2b-9a51-0e4b2f1d3c77/usage/")
    assert response.status_code == 401
