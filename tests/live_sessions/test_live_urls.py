"""Where the live proxy is reached: one host for all jobs, or one host name per job."""

import uuid

import pytest
from django.urls import reverse

from jobs.models import Job, JobState
from live_sessions.origins import host_allowed, origin_allowed
from live_sessions.views import live_base_url


def test_one_live_host_serves_every_job_under_its_path(settings):
    settings.LIVE_URL = "https://live.nightshift.campus.example/"
    job = Job(public_id=uuid.uuid4())
    assert live_base_url(job) == "https://live.nightshift.campus.example"
    assert origin_allowed(
        [("origin", "https://live.nightshift.campus.example")], str(job.public_id)
    )
    assert not origin_allowed([("origin", "https://nightshift.campus.example")], str(job.public_id))
    assert origin_allowed([], str(job.public_id))  # a program sends none
    assert host_allowed([("host", "anything.example")], str(job.public_id))


def test_a_job_placeholder_gives_each_job_a_host_name_of_its_own(settings):
    settings.LIVE_URL = "https://{job}.live.nightshift.campus.example"
    job = Job(public_id=uuid.uuid4())
    assert live_base_url(job) == f"https://{job.public_id}.live.nightshift.campus.example"
    own = f"https://{job.public_id}.live.nightshift.campus.example"
    assert origin_allowed([("origin", own)], str(job.public_id))
    assert origin_allowed([("origin", own.upper().replace("HTTPS", "https"))], str(job.public_id))
    others = (
        f"https://{uuid.uuid4()}.live.nightshift.campus.example",  # another job's
        "https://evil.live.nightshift.campus.example",
        "https://a.b.live.nightshift.campus.example",
        f"{own}.evil",
        "null",
    )
    for other in others:
        assert not origin_allowed([("origin", other)], str(job.public_id)), other


def test_with_a_host_per_job_a_jobs_paths_answer_on_its_own_host_alone(settings):
    settings.LIVE_URL = "https://{job}.live.nightshift.campus.example"
    job = Job(public_id=uuid.uuid4())
    own = f"{job.public_id}.live.nightshift.campus.example"
    assert host_allowed([("host", own)], str(job.public_id))
    for other in (
        f"{uuid.uuid4()}.live.nightshift.campus.example",
        "live.nightshift.campus.example",
        f"{own}:444",
        "",
    ):
        assert not host_allowed([("host", other)], str(job.public_id)), other
    assert not host_allowed([], str(job.public_id))


@pytest.mark.django_db
@pytest.mark.parametrize("bind", ["", "x" * 64, "A" * 64, "0" * 63, "0" * 65, "0" * 64 + "\n"])
def test_the_portal_sends_a_browser_without_a_good_binding_back_to_the_proxy(client, bind):
    from tests.factories import UserFactory

    owner = UserFactory(username="ada")
    job = Job.objects.create(
        owner=owner,
        name="j",
        output_dir="/nonexistent",
        state=JobState.RUNNING,
        cluster_id=1,
        proc_id=0,
        request={"live_services": ["serve"]},
    )
    client.force_login(owner)
    opened = client.get(reverse("live:open", args=[job.public_id, "serve"]), {"bind": bind})
    assert opened.status_code == 302
    assert opened["Location"].endswith(f"/live/{job.public_id}/serve/_nightshift/begin")
    good = client.get(reverse("live:open", args=[job.public_id, "serve"]), {"bind": "0" * 64})
    assert "/_nightshift/enter?ticket=" in good["Location"]
