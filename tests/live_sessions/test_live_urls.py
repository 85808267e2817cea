"""Where the live proxy is reached: one host for all jobs, or one host name per job."""

import uuid

from jobs.models import Job
from live_sessions.proxy import origin_allowed
from live_sessions.views import live_base_url


def test_one_live_host_serves_every_job_under_its_path(settings):
    settings.LIVE_URL = "https://live.nightshift.campus.example/"
    job = Job(public_id=uuid.uuid4())
    assert live_base_url(job) == "https://live.nightshift.campus.example"
    assert origin_allowed([("origin", "https://live.nightshift.campus.example")])
    assert not origin_allowed([("origin", "https://nightshift.campus.example")])
    assert origin_allowed([])  # a program sends none


def test_a_job_placeholder_gives_each_job_a_host_name_of_its_own(settings):
    settings.LIVE_URL = "https://{job}.live.nightshift.campus.example"
    job = Job(public_id=uuid.uuid4())
    assert live_base_url(job) == f"https://{job.public_id}.live.nightshift.campus.example"
    assert origin_allowed([("origin", f"https://{uuid.uuid4()}.live.nightshift.campus.example")])
    others = ("https://evil.live.nightshift.campus.example",
              "https://a.b.live.nightshift.campus.example",
              f"https://{job.public_id}.live.nightshift.campus.example.evil")  # fmt: skip
    for other in others:
        assert not origin_allowed([("origin", other)]), other
