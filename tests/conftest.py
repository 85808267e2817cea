import gc
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from accounts import services as account_services
from portal.celery import app
from tests.factories import UserFactory
from tests.helpers import (
    POOL_ROOT,
    pool_command,
    pool_restarts_cleanly,
    schedd_answers,
    wait_for,
)

# Real Celery worker and beat processes for the integration and browser tests; the browser's
# page and sign-in, and the pool tests' web client, for whichever app's folder holds them.
pytest_plugins = [
    "tests.pipeline",
    "tests.campus",
    "tests.notifications.receivers",
    "tests.kits.browser",
    "tests.kits.integration",
]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """The tests that start the real Celery worker and beat run last, in their usual order.
    Those processes live until the session ends and act on every row in the database: a
    study that a later test on the fake bridge commits would be advanced by the real beat
    behind the test's back (it once took the study's lock, and the test's own step
    skipped)."""
    items.sort(key=lambda item: "celery_processes" in getattr(item, "fixturenames", ()))


def fake_bridge_settings(folder: Path) -> dict:
    """The settings of a test on the fake bridge, its job folders in `folder`."""
    return {"CONDOR_BRIDGE": "fake", "JOBS_DIR": folder / "jobs", "JOB_DIR_UID": None}


def datasets_settings(folder: Path) -> dict:
    """The settings of a test's datasets, kept in `folder`, with no roots or URLs allowed."""
    return {"DATASETS_DIR": folder / "datasets", "DATASET_ROOTS": [], "DATASET_URL_ALLOW": []}


# Real hashing costs a third of a second per user; tests make hundreds of users.
FAST_PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def apply_settings(settings, values: dict) -> None:
    for name, value in values.items():
        setattr(settings, name, value)


@pytest.fixture
def fake_bridge(settings, tmp_path):
    """Services and views talk to an in-memory bridge; job folders live in tmp_path."""
    from jobs.bridge import get_bridge

    apply_settings(settings, fake_bridge_settings(tmp_path))
    get_bridge.cache_clear()
    # Tests on the fake bridge that commit (live_server) must not hand their jobs to a real
    # worker, which would send them to the real pool: their tasks run here, on the fake.
    app.conf.task_always_eager = True
    yield get_bridge()
    app.conf.task_always_eager = False
    get_bridge.cache_clear()


@pytest.fixture
def student(db):
    return UserFactory(username="student")


@pytest.fixture
def other_student(db):
    return UserFactory(username="other")


@pytest.fixture
def student_client(client, student):
    client.force_login(student)
    return client


def script_upload(body: str = "print('hello')\n", name: str = "train.py") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, body.encode(), content_type="text/x-python")


@pytest.fixture(autouse=True)
def datasets_in_tmp(settings, tmp_path):
    """Datasets a test imports are kept in its own folder, never in the checkout's var/."""
    apply_settings(settings, datasets_settings(tmp_path))


@pytest.fixture(autouse=True)
def no_drain_left_over():
    """Every test starts with a portal that accepts submissions: a drain one test left in
    the shared cache would refuse the next test's."""
    from operations.drain import DrainState, drain_remember

    drain_remember(DrainState(active=False))


@pytest.fixture(autouse=True)
def no_unanswering_schedd_left_over():
    """A schedd one test found not answering (kept in the shared cache) is not the next
    test's: its jobs' pages would say so."""
    from django.core.cache import cache

    from jobs.schedulers import UNANSWERING_KEY

    cache.delete(UNANSWERING_KEY)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = FAST_PASSWORD_HASHERS


@pytest.fixture(autouse=True)
def generous_rate_limits(settings):
    """Rate limits are tested on their own (tests/plumbing/test_throttling.py), not by chance."""
    settings.API_THROTTLE_RATES = {"submissions": "10000/minute", "tokens": "10000/minute"}


def client_with_token(user) -> APIClient:
    client = APIClient()
    secret = account_services.token_create(user=user, name="tests").secret
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def api(student):
    """The API as the student, through a personal access token."""
    return client_with_token(student)


@pytest.fixture
def other_api(other_student):
    return client_with_token(other_student)


@pytest.fixture
def anonymous_api():
    return APIClient()


@pytest.fixture
def admin_client(client, django_user_model):
    """The test client, signed in as a superuser called root."""
    admin = django_user_model.objects.create_superuser("root", "root@example.org", "a-long-pw-1")
    client.force_login(admin)
    return client


def forget_stale_submitters() -> None:
    """The stopped schedd's submitter ads (an earlier test's user, say) stay in the collector
    until they expire, 15 minutes on. The new schedd process aborts any negotiation for a
    submitter it never advertised, and HTCondor 23.9's negotiator then drops this schedd's
    real submitters too, every cycle (seen in CI: 50 jobs idle for 7 minutes). So they are
    invalidated; the schedd advertises its own again within SCHEDD_INTERVAL (30 s here)."""
    ad = POOL_ROOT / "tmp" / "nightshift-invalidate-submitters.ad"
    ad.write_text('MyType = "Query"\nTargetType = "Submitter"\nRequirements = true\n')
    pool_command("condor_advertise", "INVALIDATE_SUBMITTOR_ADS", f"/tmp/{ad.name}")


@pytest.fixture
def schedd_stopped():
    """Stops the pool's schedd (condor_off), and makes sure it is back afterwards."""

    def stop() -> None:
        pool_command("condor_off", "-daemon", "schedd")
        wait_for(lambda: not schedd_answers(), timeout=60, what="the schedd to stop")

    def start() -> None:
        pool_command("condor_on", "-daemon", "schedd")
        wait_for(schedd_answers, timeout=120, what="the schedd to answer again")
        forget_stale_submitters()

    yield stop, start
    if not schedd_answers():
        start()
    pool_restarts_cleanly()


# A job's outputs and metric rows as a training script leaves them (finished_job).
WEIGHTS = b"\x00weights\x01" * 100
OUTPUTS = {
    "outputs/model.pt": WEIGHTS,
    "outputs/tokenizer/vocab.txt": b"a\nb\nc\n",
    "outputs/notes.txt": b"not part of the model",
}
METRICS = [
    {"step": 0, "loss": 2.0, "accuracy": 0.2},
    {"step": 1, "loss": 0.5, "accuracy": 0.9},
    {"step": 2, "loss": 0.7, "accuracy": 0.8},
]


@pytest.fixture
def finished_job(fake_bridge):
    """finished_job(user, files=..., metrics=...): a job of `user`'s that ran and completed
    with those files in its folder and those metric rows in its log."""

    def make(user, *, files=None, metrics=None, name="fine-tune bert", **fields):
        from condor_bridge import JobState as Condor
        from jobs import sync
        from jobs.models import Job
        from jobs.staging import job_metrics_path

        response = client_with_token(user).post(
            reverse("api:job-list"),
            {"name": name, "gpus": 0, "script": script_upload(), **fields},
            format="multipart",
        )
        assert response.status_code == 201, response.json()
        job = Job.objects.get(public_id=response.json()["id"])
        for path, body in (OUTPUTS if files is None else files).items():
            (job.directory / path).parent.mkdir(parents=True, exist_ok=True)
            (job.directory / path).write_bytes(body)
        rows = METRICS if metrics is None else metrics
        job_metrics_path(job).write_text("".join(json.dumps(row) + "\n" for row in rows))
        fake_bridge.set_state(str(job.public_id), Condor.RUNNING)
        fake_bridge.set_state(str(job.public_id), Condor.COMPLETED, exit_code=0)
        sync.jobs_sync()
        job.refresh_from_db()
        assert job.outputs_ready, job.state
        return job

    return make


@pytest.fixture
def collections():
    """The generations of the collections that start while the test runs."""
    started: list[int] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(note)
    yield started
    gc.callbacks.remove(note)


@pytest.fixture
def unfrozen():
    """What a test leaves frozen (gc.freeze) goes back to the collector afterwards."""
    yield
    gc.unfreeze()
