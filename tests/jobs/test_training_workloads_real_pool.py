"""Real training code's first lines run on the personal pool: every held-in workload in
tests/workloads goes through the new-job form, as a student's script would, and ends well.
Worker processes, shared memory and TensorBoard's event writer all need a writable
/dev/shm, which each job has of its own."""

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(600)]

WORKLOADS = Path(__file__).resolve().parent.parent / "workloads"


@pytest.fixture
def web(client, live_pipeline):
    user = get_user_model().objects.create_user("grace", password="a-long-test-password")
    client.force_login(user)
    return client


def run_workload(web, name: str) -> Job:
    script = WORKLOADS / f"{name}.py"
    data = {
        "name": name,
        "gpus": 0,
        "cpus": 2,
        "memory_gb": 1,
        "arguments": "",
        "script": script_upload(script.read_text(), name=f"{name}.py"),
    }
    requirements = WORKLOADS / f"{name}.requirements.txt"
    if requirements.exists():
        data["requirements"] = SimpleUploadedFile("requirements.txt", requirements.read_bytes())
    response = web.post(reverse("jobs:new"), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    job = Job.objects.latest("created_at")
    wait_for_state(job, {JobState.COMPLETED, JobState.FAILED, JobState.HELD}, timeout=400)
    stdout = (job.directory / "stdout.txt").read_text()
    stderr = (job.directory / "stderr.txt").read_text()
    assert job.state == JobState.COMPLETED, (job.status_detail, stdout, stderr)
    assert "WORKLOAD OK" in stdout, (stdout, stderr)
    return job


def test_the_library_holds_the_workloads_this_file_runs():
    held = sorted(path.stem for path in WORKLOADS.glob("*.py"))
    assert held == ["multiprocessing_pool", "shared_memory_loader", "tensorboard_events"]


def test_a_multiprocessing_pool_queues_and_a_shared_array_work_under_every_start_method(web):
    job = run_workload(web, "multiprocessing_pool")
    stdout = (job.directory / "stdout.txt").read_text()
    for method in ("fork", "spawn", "forkserver"):
        assert f"{method}: pool, queue and shared array work" in stdout


def test_worker_processes_hand_over_batches_through_shared_memory(web):
    job = run_workload(web, "shared_memory_loader")
    assert "12 batches from 3 workers" in (job.directory / "stdout.txt").read_text()


def test_tensorboards_event_writer_leaves_a_loss_curve_that_tensorboard_reads(web):
    job = run_workload(web, "tensorboard_events")
    events = EventAccumulator(str(job.directory / "outputs" / "tensorboard"))
    events.Reload()
    losses = events.Scalars("train/loss")
    assert [event.step for event in losses] == list(range(25))
    assert losses[0].value == pytest.approx(1.0)
