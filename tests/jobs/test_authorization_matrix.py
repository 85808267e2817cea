"""Every endpoint that names a job: another user's token gets 404, no token gets 401."""

import pytest
from django.urls import reverse

from jobs import specs, submission
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db

# (method, url name, extra url args); one row per job endpoint in portal/api_urls.py.
JOB_ENDPOINTS = [
    ("get", "api:job-detail", []),
    ("post", "api:job-cancel", []),
    ("post", "api:job-hold", []),
    ("post", "api:job-release", []),
    ("post", "api:job-rerun", []),
    ("post", "api:job-clone", []),
    ("get", "api:job-events", []),
    ("get", "api:job-log", ["stdout"]),
    ("get", "api:job-outputs", []),
    ("get", "api:job-output", ["outputs/model.txt"]),
    ("get", "api:job-outputs-zip", []),
    ("get", "api:job-metrics", []),
]
USER_ENDPOINTS = [
    ("get", "api:job-list"),
    ("post", "api:job-list"),
    ("post", "api:match"),
    ("get", "api:pool"),
    ("get", "api:me"),
    ("get", "api:token-list"),
    ("post", "api:token-list"),
    ("get", "api:report"),
]


@pytest.fixture
def students_job(student, fake_bridge):
    job = submission.job_submit(
        user=student, spec=specs.JobSpec(name="mine"), script=script_upload()
    )
    (job.directory / "outputs" / "model.txt").write_text("weights")
    (job.directory / "stdout.txt").write_text("secret log")
    return job


def url_for(name, job, extra):
    return reverse(name, args=[job.public_id, *extra])


@pytest.mark.parametrize(("method", "name", "extra"), JOB_ENDPOINTS)
def test_another_users_token_gets_a_404_that_reveals_nothing(
    other_api, students_job, method, name, extra
):
    response = getattr(other_api, method)(url_for(name, students_job, extra))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert b"secret log" not in response.content
    assert students_job.events.count() == 1  # nothing was done to it


@pytest.mark.parametrize(("method", "name", "extra"), JOB_ENDPOINTS)
def test_no_token_gets_a_401(anonymous_api, students_job, method, name, extra):
    response = getattr(anonymous_api, method)(url_for(name, students_job, extra))
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(("method", "name"), USER_ENDPOINTS)
def test_every_other_endpoint_needs_a_token_too(anonymous_api, method, name):
    response = getattr(anonymous_api, method)(reverse(name))
    assert response.status_code == 401


def test_the_owner_reaches_every_job_endpoint(api, students_job):
    for method, name, extra in JOB_ENDPOINTS:
        response = getattr(api, method)(url_for(name, students_job, extra))
        assert response.status_code in (200, 201, 409), (name, response.status_code)


def test_another_users_job_cannot_be_copied_by_source_job(other_api, students_job):
    response = other_api.post(
        reverse("api:job-list"),
        {"name": "steal", "source_job": str(students_job.public_id)},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"source_job": ["You have no job with this id."]}


def test_the_list_shows_only_my_jobs(other_api, students_job):
    assert other_api.get(reverse("api:job-list")).json()["count"] == 0


def test_another_users_token_cannot_be_revoked(other_api, api, student):
    token = student.access_tokens.get()
    response = other_api.delete(reverse("api:token-detail", args=[token.pk]))
    assert response.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
