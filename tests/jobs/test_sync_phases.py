"""A sync cycle says where its time went: each phase's seconds, in its report, in the
Celery task's result and on /metrics."""

import contextlib
import time
import uuid

import pytest

from condor_bridge import BridgeError
from condor_bridge import JobState as CondorState
from jobs import specs, submission, sync
from jobs.models import Job
from jobs.tasks import sync_jobs
from tests.conftest import script_upload
from tests.operations.test_metrics_view import scrape

pytestmark = pytest.mark.django_db

SLOW_SCHEDD_S = 0.3


def submitted(student) -> Job:
    job = submission.job_submit(
        user=student, spec=specs.JobSpec(name="timed"), script=script_upload()
    )
    with contextlib.suppress(BridgeError):
        submission.job_submit_to_pool(job.pk)
    return job


@pytest.fixture
def slow_schedd(fake_bridge, monkeypatch):
    """A schedd that takes SLOW_SCHEDD_S to answer a queue query."""
    answer = fake_bridge.active_jobs

    def slowly():
        time.sleep(SLOW_SCHEDD_S)
        return answer()

    monkeypatch.setattr(fake_bridge, "active_jobs", slowly)
    return fake_bridge


def test_every_phase_of_a_cycle_with_jobs_is_timed_in_order(fake_bridge, student):
    job = submitted(student)
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING)
    report = sync.jobs_sync()
    assert report.changed == 1
    assert list(report.phases) == list(sync.SYNC_PHASES)
    assert all(seconds >= 0 for seconds in report.phases.values())
    assert sum(report.phases.values()) <= report.seconds


def test_a_slow_schedd_shows_in_the_ask_phase(slow_schedd, student):
    submitted(student)
    report = sync.jobs_sync()
    assert report.phases["ask"] >= SLOW_SCHEDD_S
    others = sum(seconds for phase, seconds in report.phases.items() if phase != "ask")
    assert others <= report.seconds - SLOW_SCHEDD_S


def test_a_cycle_without_active_jobs_reads_and_does_housekeeping_only(fake_bridge, student):
    report = sync.jobs_sync()
    assert list(report.phases) == ["read", "housekeeping"]


def test_the_task_returns_the_phases(fake_bridge, student):
    submitted(student)
    result = sync_jobs.apply().get()
    assert list(result["phases"]) == list(sync.SYNC_PHASES)


def test_metrics_give_each_phase_its_histogram(client, settings, fake_bridge, student):
    settings.NIGHTSHIFT_INSTANCE = f"metrics-{uuid.uuid4().hex[:12]}"
    submitted(student)
    sync.jobs_sync()
    sync.jobs_sync()
    samples = scrape(client)
    for phase in sync.SYNC_PHASES:
        labels = (("phase", phase),)
        assert samples[("nightshift_sync_phase_duration_seconds_count", labels)] == 2
        assert samples[("nightshift_sync_phase_duration_seconds_sum", labels)] >= 0
