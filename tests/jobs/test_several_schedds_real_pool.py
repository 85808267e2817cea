"""Two access points in front of one pool (the personal pool's `pool schedds 2`): jobs go to
the least loaded, the second one's files travel by spool, and a stopped schedd holds up only
its own jobs while every action reaches the schedd that has the job."""

import pytest
from django.urls import reverse

from jobs.bridge import get_bridge
from jobs.models import Job, JobState
from tests.helpers import htcondor_copies, pool_command, pool_schedds, wait_for
from tests.kits.integration import upload
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(600)]

WRITES_A_FILE = """
import os, sys
os.makedirs("outputs", exist_ok=True)
with open("outputs/model.txt", "w") as f:
    f.write("weights:" + ",".join(sys.argv[1:]))
print("done", flush=True)
"""
SLEEPS = "import time\nprint('started', flush=True)\ntime.sleep(600)\n"


def copies_in(schedd: str, job: Job) -> int:
    """How many HTCondor jobs with this job's id `schedd` has, queue plus history (a spooled
    job stays in the queue until its outputs are fetched, and a while after)."""
    return len(htcondor_copies(get_bridge(schedd), str(job.public_id)))


def in_queue_of(schedd: str, job: Job) -> bool:
    return any(o.job_id == str(job.public_id) for o in get_bridge(schedd).active_jobs())


def test_jobs_go_to_the_least_loaded_schedd_and_each_comes_back_from_its_own(web, two_schedds):
    first, second = two_schedds
    one = upload(web, WRITES_A_FILE, name="one", arguments="first")
    two = upload(web, WRITES_A_FILE, name="two", arguments="second")
    assert (one.schedd, two.schedd) == (first, second)
    for job, word in ((one, "first"), (two, "second")):
        wait_for_state(job, {JobState.COMPLETED, JobState.FAILED}, timeout=180)
        assert job.state == JobState.COMPLETED, list(job.events.values_list("kind", "detail"))
        wait_for(
            lambda job=job: Job.objects.get(pk=job.pk).outputs_ready,
            timeout=60,
            what=f"{job.name}'s outputs",
        )
        response = web.get(reverse("jobs:output", args=[job.public_id, "outputs/model.txt"]))
        assert b"".join(response.streaming_content) == f"weights:{word}".encode()
    # Each schedd has its own job, once, and not the other's.
    assert [copies_in(first, one), copies_in(first, two)] == [1, 0]
    assert [copies_in(second, one), copies_in(second, two)] == [0, 1]
    page = web.get(reverse("jobs:detail", args=[two.public_id])).content.decode()
    assert second in page


def test_a_stopped_schedd_holds_up_only_its_jobs_and_actions_reach_each_jobs_schedd(
    web, two_schedds
):
    first, second = two_schedds
    here = upload(web, SLEEPS, name="here")
    there = upload(web, SLEEPS, name="there")
    assert (here.schedd, there.schedd) == (first, second)
    wait_for_state(here, {JobState.RUNNING}, timeout=120)
    wait_for_state(there, {JobState.RUNNING}, timeout=120)

    pool_command("condor_off", "-daemon", "SCHEDD_AP2")
    status = reverse("jobs:status", args=[there.public_id])
    wait_for(
        lambda: "is not answering" in web.get(status).json()["schedd_problem"],
        timeout=60,
        what="ap2's job's page to say its scheduler is not answering",
    )
    assert f"Scheduler {second} is not answering" in web.get(status).json()["schedd_problem"]
    assert web.get(reverse("jobs:status", args=[here.public_id])).json()["schedd_problem"] == ""
    # The first schedd's job is held and released as before: the sync goes on without ap2.
    assert web.post(reverse("jobs:hold", args=[here.public_id])).status_code == 302
    wait_for_state(here, {JobState.HELD}, timeout=60)
    assert web.post(reverse("jobs:release", args=[here.public_id])).status_code == 302
    wait_for_state(here, {JobState.IDLE, JobState.RUNNING}, timeout=60)

    pool_command("condor_on", "-daemon", "SCHEDD_AP2")
    wait_for(
        lambda: web.get(status).json()["schedd_problem"] == "",
        timeout=90,
        what="ap2's job to catch up once its scheduler answers",
    )
    assert web.post(reverse("jobs:cancel", args=[there.public_id])).status_code == 302
    wait_for_state(there, {JobState.REMOVED}, timeout=90)
    # The sync sees the removal while the job is still in ap2's queue (JobStatus 3, its shadow
    # not yet gone); it leaves the queue a moment later.
    wait_for(
        lambda: not in_queue_of(second, there),
        timeout=60,
        what="the removed job to leave ap2's queue",
    )
    here.refresh_from_db()
    assert here.state in (JobState.IDLE, JobState.RUNNING)
    assert in_queue_of(first, here)
    assert web.post(reverse("jobs:cancel", args=[here.public_id])).status_code == 302
    wait_for_state(here, {JobState.REMOVED}, timeout=60)


def submitters_of(schedd: str) -> list[str]:
    """The submitter ads (one per user with jobs) the collector holds for `schedd`."""
    listed = pool_command("condor_status", "-submitters", "-af", "ScheddName", "Name")
    return [line.split()[1] for line in listed.stdout.splitlines() if line.split()[0] == schedd]


def test_a_second_schedd_stopped_fast_leaves_no_submitter_and_its_next_jobs_run(web, two_schedds):
    first, second = two_schedds
    upload(web, SLEEPS, name="here")
    there = upload(web, SLEEPS, name="there")
    assert there.schedd == second
    wait_for_state(there, {JobState.RUNNING}, timeout=120)
    assert submitters_of(second)
    # A fast stop (the fixture's teardown) skips the schedd's own taking out of its
    # submitters. One left in the collector for a user the next ap2, at the same address,
    # no longer has, and the negotiator matched none of that ap2's jobs.
    assert pool_schedds(1) == [first]
    assert submitters_of(second) == []
    assert pool_schedds(2) == [first, second]
    # The first action on ap2 after its restart: htcondor2 failed it ("Error when performing
    # action on the schedd"), a stale session, and the bridge tries it once more.
    response = web.post(reverse("jobs:cancel", args=[there.public_id]), follow=True)
    assert "could not" not in " ".join(str(m) for m in response.context["messages"])
    wait_for_state(there, {JobState.REMOVED}, timeout=120)
    later = upload(web, SLEEPS, name="later")
    assert later.schedd == second
    wait_for_state(later, {JobState.RUNNING}, timeout=120)
