"""Every API address and field that takes a job takes the start of its id too, as
`nightshift list` and the job pages show it. A start that several of the user's jobs share is
refused with the jobs it matches; other people's jobs never match, nor make a start
ambiguous."""

import uuid

import pytest
from django.urls import reverse

from jobs import specs, submission
from jobs.models import Job
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db

JOBS = reverse("api:job-list")


def a_job_with_id(user, full_id: str, name: str = "x") -> Job:
    job = submission.job_submit(user=user, spec=specs.JobSpec(name=name), script=script_upload())
    Job.objects.filter(pk=job.pk).update(public_id=uuid.UUID(full_id))
    job.refresh_from_db()
    return job


def test_the_jobs_addresses_take_the_first_eight_characters_of_its_id(api, student, fake_bridge):
    job = a_job_with_id(student, "8e1fd57c-1111-4111-8111-111111111111", "train.py")
    for name in ("api:job-detail", "api:job-events", "api:job-outputs", "api:job-usage"):
        response = api.get(reverse(name, args=["8e1fd57c"]))
        assert response.status_code == 200, (name, response.json())
    assert api.get(reverse("api:job-detail", args=["8E1FD57C"])).json()["id"] == str(job.public_id)
    cancelled = api.post(reverse("api:job-cancel", args=["8e1f"]))
    assert cancelled.status_code == 200, cancelled.json()


def test_a_start_that_two_jobs_share_is_refused_naming_both(api, student, fake_bridge):
    a_job_with_id(student, "8e1fd57c-1111-4111-8111-111111111111", "train.py")
    a_job_with_id(student, "8e1f0a2b-2222-4222-8222-222222222222", "eval.py")
    response = api.get(reverse("api:job-detail", args=["8e1f"]))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "ambiguous"
    assert "8e1f is the start of 2 jobs' ids" in error["message"]
    assert "8e1fd57c (train.py)" in error["message"]
    assert "8e1f0a2b (eval.py)" in error["message"]
    one = api.get(reverse("api:job-detail", args=["8e1fd"]))
    assert one.json()["name"] == "train.py"


def test_another_users_job_neither_matches_nor_makes_a_start_ambiguous(
    api, student, other_student, fake_bridge
):
    theirs = a_job_with_id(other_student, "8e1f0a2b-2222-4222-8222-222222222222", "theirs")
    assert api.get(reverse("api:job-detail", args=["8e1f0a2b"])).status_code == 404
    assert api.get(reverse("api:job-detail", args=[theirs.public_id])).status_code == 404
    mine = a_job_with_id(student, "8e1fd57c-1111-4111-8111-111111111111", "mine")
    assert api.get(reverse("api:job-detail", args=["8e1f"])).json()["id"] == str(mine.public_id)


@pytest.mark.parametrize("reference", ["8e1", "zzzz", "8e1f%", "-8e1f", "8e1f'--"])
def test_what_is_not_the_start_of_an_id_finds_nothing(api, student, fake_bridge, reference):
    a_job_with_id(student, "8e1fd57c-1111-4111-8111-111111111111")
    response = api.get(f"{JOBS}{reference}/")
    assert response.status_code == 404


def test_a_copy_names_its_source_job_by_the_start_of_its_id(api, student, fake_bridge):
    a_job_with_id(student, "8e1fd57c-1111-4111-8111-111111111111", "train.py")
    copy = api.post(JOBS, {"source_job": "8e1fd57c", "gpus": 0}, format="json")
    assert copy.status_code == 201, copy.json()
    a_job_with_id(student, "8e1f0a2b-2222-4222-8222-222222222222", "eval.py")
    refused = api.post(JOBS, {"source_job": "8e1f", "gpus": 0}, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "ambiguous"
    assert "source_job" in refused.json()["error"]["fields"]
