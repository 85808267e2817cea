"""Notebook sessions as a service and as pages: what is refused and why, what the session
page shows as the end nears, and why a session ended."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from environments.models import Environment, EnvironmentVersion
from jobs.models import Job, JobState
from jobs.specs import JobSpec, JobSubmissionError
from live_sessions.sessions import NOTEBOOK_SCRIPT_NAME, session_status, session_submit
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

LOCK = "{name}==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n"


def environment(user, name: str, package: str) -> str:
    env = Environment.objects.create(owner=user, name=name)
    EnvironmentVersion.objects.create(
        environment=env,
        number=1,
        requirements=package,
        python_version="3.13",
        lock=LOCK.format(name=package),
        lock_sha256="a" * 64,
    )
    return f"{name}@1"


@pytest.fixture
def ada(fake_bridge):
    return UserFactory(username="ada")


def spec(**fields) -> JobSpec:
    return JobSpec(name="explore", gpus=0, cpus=1, memory_mb=1024, **fields)


def test_a_session_is_a_job_that_runs_jupyterlab_with_its_limits(ada, settings):
    settings.LIVE_SESSION_IDLE_S = 1800
    job = session_submit(
        user=ada, spec=spec(software=environment(ada, "nb", "jupyterlab"), session_limit_s=5400)
    )
    assert job.live_services == ("notebook",)
    assert job.request["script_name"] == NOTEBOOK_SCRIPT_NAME
    assert (job.request["session_limit_s"], job.request["session_idle_s"]) == (5400, 1800)
    assert "nightshift.run_notebook()" in (job.directory / NOTEBOOK_SCRIPT_NAME).read_text()
    secret = job.directory / ".nightshift" / "live-secret"
    assert secret.read_text().strip() == job.live_secret and len(job.live_secret) >= 40
    assert secret.stat().st_mode & 0o077 == 0
    # The token is nowhere HTCondor (or anyone who reads job ads) sees it.
    assert job.live_secret not in json.dumps(job.request)


def test_an_environment_without_jupyterlab_is_refused_with_what_to_do(ada):
    with pytest.raises(JobSubmissionError) as refused:
        session_submit(user=ada, spec=spec(software=environment(ada, "plain", "numpy")))
    assert refused.value.field == "software_environment"
    assert "plain has no JupyterLab" in refused.value.message
    assert "Add this line to its requirements" in refused.value.message
    assert refused.value.message.count("jupyterlab") == 1  # the one line to add
    # Nor does the workstations' own Python, which has no packages at all.
    with pytest.raises(JobSubmissionError) as bare:
        session_submit(user=ada, spec=spec(software="System Python@1"))
    assert "System Python has no JupyterLab" in bare.value.message
    with pytest.raises(JobSubmissionError) as none:
        session_submit(user=ada, spec=spec())
    assert "Choose an environment with jupyterlab" in none.value.message


def test_one_person_may_have_only_so_many_sessions_open(ada, settings):
    settings.LIVE_MAX_OPEN_SESSIONS = 2
    software = environment(ada, "nb", "jupyterlab")
    first = session_submit(user=ada, spec=spec(software=software))
    session_submit(user=ada, spec=spec(software=software))
    with pytest.raises(JobSubmissionError) as refused:
        session_submit(user=ada, spec=spec(software=software))
    assert "You have 2 notebook sessions open" in refused.value.message
    Job.objects.filter(pk=first.pk).update(state=JobState.COMPLETED)
    session_submit(user=ada, spec=spec(software=software))


def test_a_session_longer_than_the_site_allows_is_refused(ada, settings):
    settings.LIVE_SESSION_MAX_HOURS = 4
    with pytest.raises(JobSubmissionError) as refused:
        session_submit(
            user=ada,
            spec=spec(software=environment(ada, "nb", "jupyterlab"), session_limit_s=5 * 3600),
        )
    assert "at most 4 hours" in refused.value.message


def test_the_page_warns_ten_minutes_before_the_time_limit(ada):
    job = session_submit(
        user=ada, spec=spec(software=environment(ada, "nb", "jupyterlab"), session_limit_s=3600)
    )
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(
        state=JobState.RUNNING, started_at=now - timedelta(minutes=45)
    )
    job.refresh_from_db()
    early = session_status(job, now=now)
    assert (early.seconds_left, early.warn) == (15 * 60, False)
    late = session_status(job, now=now + timedelta(minutes=6))
    assert (late.seconds_left, late.warn) == (9 * 60, True)


@pytest.mark.parametrize(
    "reason, says",
    [
        ("time limit", "The session reached its time limit of 1 hours."),
        ("idle", "The session ended after 30 minutes without activity."),
    ],
)
def test_the_page_says_why_a_session_ended(ada, settings, reason, says):
    settings.LIVE_SESSION_IDLE_S = 1800
    job = session_submit(
        user=ada, spec=spec(software=environment(ada, "nb", "jupyterlab"), session_limit_s=3600)
    )
    (job.directory / ".nightshift" / "session-end.json").write_text(json.dumps({"reason": reason}))
    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED)
    job.refresh_from_db()
    status = session_status(job, now=timezone.now())
    assert status.ended.startswith(says)
    assert "files you saved in the session folder are kept" in status.ended
    assert status.state_label == "Ended"


def site_notebook_environment(name: str = "Notebook") -> None:
    env = Environment.objects.create(name=name, visibility="site")
    EnvironmentVersion.objects.create(
        environment=env,
        number=1,
        requirements="jupyterlab",
        python_version="3.13",
        lock=LOCK.format(name="jupyterlab"),
        lock_sha256="b" * 64,
    )


def offered(page: str) -> list[str]:
    select = page.split('name="software_environment"', 1)[1].split("</select>", 1)[0]
    return [part.split('"', 1)[0] for part in select.split('<option value="')[1:]]


def test_the_session_form_offers_only_environments_with_jupyterlab_the_sites_first(ada, client):
    environment(ada, "my-nb", "jupyterlab")
    environment(ada, "plain", "numpy")
    site_notebook_environment()
    client.force_login(ada)
    page = client.get(reverse("sessions:new")).content.decode()
    # Not System Python (the site's default for jobs, with no packages), nor "plain".
    assert offered(page) == ["Notebook@1", "my-nb@1"]
    assert '<option value="Notebook@1" selected>' in page


def test_an_environment_without_jupyterlab_is_refused_before_anything_is_submitted(ada, client):
    environment(ada, "plain", "numpy")
    client.force_login(ada)
    answer = client.post(
        reverse("sessions:new"),
        {
            "name": "explore",
            "software_environment": "plain@1",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 1,
            "hours": 1,
        },
    )
    assert answer.status_code == 400
    assert "plain has no JupyterLab" in answer.content.decode()
    assert not Job.objects.exists()


def test_a_link_to_an_environment_without_jupyterlab_says_what_to_add(ada, client):
    environment(ada, "plain", "numpy")
    site_notebook_environment()
    client.force_login(ada)
    page = client.get(reverse("sessions:new"), {"environment": "plain@1"}).content.decode()
    assert 'data-role="environment-needs-jupyterlab"' in page
    assert "plain has no JupyterLab" in page
    assert '<option value="Notebook@1" selected>' in page
    ready = client.get(reverse("sessions:new"), {"environment": "Notebook@1"}).content.decode()
    assert "environment-needs-jupyterlab" not in ready


def test_the_session_form_starts_a_session_and_shows_its_page(ada, client):
    software = environment(ada, "nb", "jupyterlab")
    client.force_login(ada)
    answer = client.post(
        reverse("sessions:new"),
        {
            "name": "explore",
            "software_environment": software,
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 1,
            "hours": 1.5,
        },
    )
    job = Job.objects.get(name="explore")
    assert answer.status_code == 302 and answer["Location"] == reverse(
        "live:page", args=[job.public_id]
    )
    assert job.request["session_limit_s"] == 5400
    page = client.get(answer["Location"])
    assert b"Waiting for a workstation" in page.content
    status = client.get(reverse("live:status", args=[job.public_id])).json()
    assert status["state"] == JobState.QUEUED and status["ended"] == ""


def test_a_session_form_asking_too_long_keeps_what_was_typed(ada, client, settings):
    settings.LIVE_SESSION_MAX_HOURS = 2
    software = environment(ada, "nb", "jupyterlab")
    client.force_login(ada)
    answer = client.post(
        reverse("sessions:new"),
        {
            "name": "too long",
            "software_environment": software,
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 1,
            "hours": 3,
        },
    )
    assert answer.status_code == 400
    assert "A session may last at most 2 hours." in answer.content.decode()
    assert 'value="too long"' in answer.content.decode()
    assert not Job.objects.exists()


def test_another_users_session_page_status_and_tokens_are_404(ada, client):
    job = session_submit(user=ada, spec=spec(software=environment(ada, "nb", "jupyterlab")))
    client.force_login(UserFactory(username="eve"))
    for url in (
        reverse("live:page", args=[job.public_id]),
        reverse("live:status", args=[job.public_id]),
        reverse("live:open", args=[job.public_id, "notebook"]),
    ):
        assert client.get(url).status_code == 404
    assert (
        client.post(reverse("live:share", args=[job.public_id]), {"shared": "1"}).status_code == 404
    )


def test_htcondor_itself_ends_a_session_whose_helper_did_not(ada, fake_bridge):
    from condor_bridge import JobState as Condor
    from jobs import submission, sync

    job = session_submit(
        user=ada, spec=spec(software=environment(ada, "nb", "jupyterlab"), session_limit_s=3600)
    )
    submission.job_submit_to_pool(job.pk)
    description = fake_bridge.submitted[str(job.public_id)]
    assert (
        description["periodic_remove"] == "JobStatus == 2 && (time() - JobCurrentStartDate) > 3900"
    )
    fake_bridge.set_state(str(job.public_id), Condor.RUNNING)
    sync.jobs_sync()
    detail = "HTCondor ended the session: it ran past its time limit of 1 hour."
    fake_bridge.set_state(
        str(job.public_id), Condor.REMOVED, status_detail=detail, removed_by_limit=True
    )
    sync.jobs_sync()
    job.refresh_from_db()
    ended = session_status(job, now=timezone.now()).ended
    assert ended.startswith(detail)
    assert "files you saved in the session folder are kept" in ended
