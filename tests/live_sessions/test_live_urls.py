"""Where the live proxy is reached: one host for all jobs, or one host name per job."""

import uuid

from jobs.models import Job
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
