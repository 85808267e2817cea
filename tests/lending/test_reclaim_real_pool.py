"""In Chromium, on the personal pool: a workstation's owner presses "I need it back in 1
minute" while a checkpointing training job runs there. The job is told first and saves, is
vacated within the minute, and goes on from its checkpoint on another workstation, its loss
curve without a gap; the work it lost is not charged."""

import time

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from condor_bridge.submit import CHECKPOINT_LOG
from jobs import selectors
from jobs.models import Job, JobState
from tests.factories import LabFactory, MembershipFactory
from tests.forecasts.test_reservations_real_pool import GPU_WORKSTATIONS
from tests.helpers import wait_for
from tests.kits.browser import sign_in
from tests.lending.test_lending_real_pool import (  # noqa: F401 - fixtures
    kit_reads_the_portal,
    prof,
    published,
)
from tests.lending.test_owner_returns import CHECKPOINTING, submit, trains_a_few_steps
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.browser, pytest.mark.timeout(600)]

# The owner-return tests' trainer, long enough (100 s) to outlast the 30 s between the notice
# and the vacate, and the move.
assert "while step < 30:" in CHECKPOINTING
TRAINER = CHECKPOINTING.replace("while step < 30:", "while step < 200:")


def test_asked_back_in_one_minute_a_checkpointing_job_leaves_in_time_and_resumes_elsewhere(
    kit_reads_the_portal,  # noqa: F811 - the fixture imported above
    prof,  # noqa: F811
    client,
    live_pipeline,
    page,
    screenshot,
):
    student = get_user_model().objects.create_user("ada", password="a-long-test-password")
    MembershipFactory(user=student, lab=LabFactory(name="Vision"))
    client.force_login(student)
    job = submit(client, TRAINER)
    trains_a_few_steps(job)
    first = Job.objects.get(pk=job.pk).workstation
    assert first in GPU_WORKSTATIONS

    # The owner, in Chromium: their page names the lab, never the student, and one press
    # asks for the machine back within the minute.
    sign_in(page, kit_reads_the_portal.url, "prof")
    page.goto(f"{kit_reads_the_portal.url}{reverse('lending:workstation', args=[first])}")
    running = page.locator("[data-role=running]").inner_text()
    assert "Running 1 job for" in running and "Vision" in running
    assert "ada" not in page.content()
    page.get_by_label("I need it back in (minutes)").fill("1")
    asked_at = time.monotonic()
    page.get_by_role("button", name="I need it back").click()
    page.locator("[data-countdown]").wait_for()
    screenshot("reclaim-countdown")
    wait_for(
        lambda: (
            Job.objects.get(pk=job.pk).workstation != first
            or Job.objects.get(pk=job.pk).state != JobState.RUNNING
        ),
        timeout=60,
        what="the job to leave the workstation within the minute",
    )
    assert time.monotonic() - asked_at < 60
    resumed = wait_for(
        lambda: (
            (j := Job.objects.get(pk=job.pk)).state == JobState.RUNNING
            and j.workstation != first
            and j.workstation
        ),
        timeout=120,
        what="the job to run on another workstation",
    )
    # Nothing starts where its owner asked for it back.
    assert published("NightshiftLendOpen")[first] == "false"
    wait_for_state(job, {JobState.COMPLETED}, timeout=180)
    stdout = (job.directory / "stdout.txt").read_text()
    resumed_at = [
        int(line.split()[-1]) for line in stdout.splitlines() if line.startswith("resumed at")
    ]
    assert resumed_at[0] == 0 and max(resumed_at) > 0, stdout
    evicted = job.events.get(kind="evicted")
    assert evicted.detail.startswith(f"{first}'s owner asked for it back"), evicted.detail
    assert "resume from its checkpoint" in evicted.detail
    assert job.events.filter(kind="resumed", detail__contains=resumed).exists()
    # Told before the SIGTERM, the job saved while it still had the workstation, and went
    # on there from that save until it had to leave.
    assert 0 < resumed_at[1] <= max(resumed_at), stdout
    saves = (job.directory / CHECKPOINT_LOG).read_text().splitlines()
    assert len(saves) >= 2, saves  # the one it was told to make, and the one at SIGTERM
    # Its loss curve has no gap: every step from the first to the last was logged.
    steps = {
        row["step"]
        for row in selectors.job_metrics(
            job.directory, job.directory / ".nightshift" / "metrics.jsonl"
        ).rows
    }
    assert steps == set(range(1, max(steps) + 1))
    sign_in(page, kit_reads_the_portal.url, "ada")
    page.goto(f"{kit_reads_the_portal.url}{reverse('jobs:detail', args=[job.public_id])}")
    page.locator("figure[data-metric=loss] svg path").wait_for()
    page.get_by_text(f"{first}'s owner asked for it back").first.wait_for()
    screenshot("reclaim-job-resumed")
