"""On the personal pool: a workstation's owner comes back (its GPU probe says so) while a job
trains there. The job is vacated, moves to another workstation, and a checkpointing script
carries on from its last checkpoint; one that ignores checkpoints starts again from zero."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from accounting.models import UsageRecord
from jobs import selectors
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.helpers import OwnerAtDesk, wait_for
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]
STEPS = 30

CHECKPOINTING = f"""
import json, os, time
import nightshift

state = os.path.join(nightshift.checkpoint_dir(), "state.json")
step = json.load(open(state))["step"] if os.path.exists(state) else 0
print("resumed at", step, flush=True)
while step < {STEPS}:
    step += 1
    time.sleep(0.5)
    nightshift.log(step=step, loss=1 / step)
    if nightshift.should_checkpoint():
        def save(folder):
            json.dump({{"step": step}}, open(os.path.join(folder, "state.json"), "w"))
        nightshift.checkpoint_and_exit(save)
print("finished", flush=True)
"""

FROM_ZERO = f"""
import time
import nightshift

print("started from zero", flush=True)
for step in range(1, {STEPS} + 1):
    time.sleep(0.5)
    nightshift.log(step=step, loss=1 / step)
print("finished", flush=True)
"""


@pytest.fixture
def owner():
    desk = OwnerAtDesk()
    yield desk
    desk.leave_all()


@pytest.fixture
def student_client(client, transactional_db):
    user = get_user_model().objects.create_user("ada", password="a-long-test-password")
    client.force_login(user)
    return client


def submit(client, script: str) -> Job:
    response = client.post(
        reverse("jobs:new"),
        {
            "name": "trainer",
            "gpus": 1,
            "cpus": 1,
            "memory_gb": 0.25,
            "arguments": "",
            "script": script_upload(script),
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    return Job.objects.latest("created_at")


def trains_a_few_steps(job: Job) -> None:
    wait_for_state(job, {JobState.RUNNING}, timeout=120)
    wait_for(
        lambda: (
            len(
                selectors.job_metrics(
                    job.directory, job.directory / ".nightshift" / "metrics.jsonl"
                ).rows
            )
            >= 5
        ),
        timeout=60,
        what="a few training steps",
    )


def evict_once(job: Job, owner: OwnerAtDesk) -> tuple[str, str]:
    """Let it train a few steps, bring the owner back, and wait for it to run elsewhere."""
    trains_a_few_steps(job)
    first = Job.objects.get(pk=job.pk).workstation
    owner.returns_to(first)
    wait_for(lambda: job.events.filter(kind="evicted").exists(), timeout=90, what="the eviction")
    resumed = wait_for(
        lambda: (
            (j := Job.objects.get(pk=job.pk)).state == JobState.RUNNING
            and j.workstation != first
            and j.workstation
        ),
        timeout=120,
        what="the job to run on another workstation",
    )
    return first, resumed


def test_a_checkpointing_job_resumes_elsewhere_and_logs_every_step_once(
    student_client, owner, live_pipeline
):
    job = submit(student_client, CHECKPOINTING)
    first, second = evict_once(job, owner)
    wait_for_state(job, {JobState.COMPLETED}, timeout=180)
    stdout = (job.directory / "stdout.txt").read_text()
    resumed_at = [
        int(line.split()[-1]) for line in stdout.splitlines() if line.startswith("resumed at")
    ]
    assert resumed_at[0] == 0 and max(resumed_at) > 0, stdout
    metrics = selectors.job_metrics(job.directory, job.directory / ".nightshift/metrics.jsonl")
    assert [row["step"] for row in metrics.rows] == list(range(1, STEPS + 1))
    evicted = job.events.get(kind="evicted")
    assert evicted.detail.startswith(f"{first} was reclaimed by its owner")
    assert "resume from its checkpoint" in evicted.detail
    assert job.events.filter(kind="resumed", detail__contains=second).exists()
    runs = list(UsageRecord.objects.filter(job=job).order_by("started_at"))
    assert [run.workstation for run in runs][:2] == [first, second]
    assert runs[0].ended_by == "evicted"
    # HTCondor's counters miss a checkpoint on the shared file system; the helper's log
    # tells the accounting what the eviction did not lose.
    assert runs[0].committed_s > 0 and runs[0].badput_s < runs[0].wall_s


def test_a_job_that_ignores_checkpoints_starts_again_from_zero_and_still_finishes(
    student_client, owner, live_pipeline
):
    job = submit(student_client, FROM_ZERO)
    first, _ = evict_once(job, owner)
    wait_for_state(job, {JobState.COMPLETED}, timeout=180)
    stdout = (job.directory / "stdout.txt").read_text()
    assert stdout.count("started from zero") >= 1 and "finished" in stdout
    evicted = job.events.get(kind="evicted")
    assert "start again from the beginning" in evicted.detail
    metrics = selectors.job_metrics(job.directory, job.directory / ".nightshift/metrics.jsonl")
    assert [row["step"] for row in metrics.rows] == list(range(1, STEPS + 1))
    evicted_run = UsageRecord.objects.filter(job=job, ended_by="evicted").first()
    assert evicted_run.badput_s == evicted_run.wall_s > 0


def test_a_job_an_admin_moves_resumes_from_its_checkpoint(student_client, live_pipeline):
    from jobs import actions

    admin = get_user_model().objects.create_user("root", is_staff=True)
    job = submit(student_client, CHECKPOINTING)
    trains_a_few_steps(job)
    actions.job_vacate(job=Job.objects.get(pk=job.pk), user=admin)
    wait_for_state(job, {JobState.COMPLETED}, timeout=180)
    evicted = job.events.get(kind="evicted")
    assert (
        "by an administrator" in evicted.detail and "resume from its checkpoint" in evicted.detail
    )
    stdout = (job.directory / "stdout.txt").read_text()
    assert (
        max(int(line.split()[-1]) for line in stdout.splitlines() if line.startswith("resumed at"))
        > 0
    )
    metrics = selectors.job_metrics(job.directory, job.directory / ".nightshift/metrics.jsonl")
    assert [row["step"] for row in metrics.rows] == list(range(1, STEPS + 1))
