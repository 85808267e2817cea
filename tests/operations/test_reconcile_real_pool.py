"""`manage.py reconcile` against the real pool: drift injected behind the portal's back (a
job submitted straight to the schedd, a job held there, a job ended only in the portal, a
job the schedd never had) is found and repaired."""

import uuid
from io import StringIO

import htcondor2
import pytest
from django.conf import settings
from django.core.management import call_command

from condor_bridge import JobState as CondorState
from jobs import actions, specs, submission, sync
from jobs.bridge import get_bridge
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.helpers import wait_for

pytestmark = [pytest.mark.condor, pytest.mark.django_db]


@pytest.fixture
def own_instance(settings, pool_is_up):
    """This test's jobs alone carry this instance name, so no other test's job is drift."""
    settings.NIGHTSHIFT_INSTANCE = f"reconcile-{uuid.uuid4().hex[:10]}"
    get_bridge.cache_clear()
    yield settings.NIGHTSHIFT_INSTANCE
    get_bridge.cache_clear()


def schedd() -> htcondor2.Schedd:
    htcondor2.param["SEC_TOKEN_DIRECTORY"] = str(settings.CONDOR_TOKEN_DIR)
    collector = htcondor2.Collector(settings.CONDOR_COLLECTOR)
    return htcondor2.Schedd(collector.locate(htcondor2.DaemonType.Schedd))


def in_queue(constraint: str) -> list:
    return list(schedd().query(constraint=constraint, projection=["JobStatus", "ClusterId"]))


def test_injected_drift_is_repaired(own_instance, student):
    stranger = str(uuid.uuid4())
    description = htcondor2.Submit(
        {
            "executable": "/bin/sleep",
            "arguments": "600",
            "hold": "true",
            "My.NightshiftJobId": f'"{stranger}"',
            "My.NightshiftInstance": f'"{own_instance}"',
        }
    )
    schedd().submit(description, count=1)

    def submitted(name: str) -> Job:
        sleeper = script_upload("import time; time.sleep(600)\n")
        job = submission.job_submit(user=student, spec=specs.JobSpec(name=name), script=sleeper)
        submission.job_submit_to_pool(job.pk)
        job.refresh_from_db()
        return job

    held = submitted("held-behind-our-back")
    schedd().act(
        htcondor2.JobAction.Hold,
        f"{held.cluster_id}.{held.proc_id}",
        reason=("held by an administrator", 1),
    )
    ended = submitted("ended-in-portal-only")
    Job.objects.filter(pk=ended.pk).update(state=JobState.REMOVED)
    copied = submitted("sent-twice")
    # Held, and its row told so, so that only its second copy differs from the portal.
    actions.job_hold(job=copied, user=student)
    seen = wait_for(
        lambda: [
            o
            for o in [get_bridge().find(str(copied.public_id))]
            if o is not None and o.state is CondorState.HELD
        ],
        timeout=60,
        what="the job held",
    )
    sync.job_apply_observation(copied.pk, seen[0])
    copy = get_bridge().submit(specs.job_request_of(copied), check_existing=False)
    lost = submission.job_submit(
        user=student, spec=specs.JobSpec(name="never-there"), script=script_upload()
    )
    Job.objects.filter(pk=lost.pk).update(cluster_id=9_999_999, proc_id=0, state=JobState.IDLE)

    out = StringIO()
    call_command("reconcile", stdout=out)
    said = out.getvalue()
    assert "5 differences repaired." in said, said
    for kind, job_id in [
        ("unknown", stranger),
        ("ended", ended.public_id),
        ("stale", held.public_id),
        ("lost", lost.public_id),
        ("copy", copied.public_id),
    ]:
        assert any(line.startswith(kind) and str(job_id) in line for line in said.splitlines())

    gone = (
        f'NightshiftJobId == "{stranger}" || ClusterId == {ended.cluster_id} '
        f"|| ClusterId == {copy.cluster_id}"
    )
    wait_for(
        lambda: not [ad for ad in in_queue(gone) if ad["JobStatus"] != 3],
        timeout=60,
        what="the unknown and ended jobs and the copy to leave",
    )
    kept = in_queue(f'NightshiftJobId == "{copied.public_id}" && JobStatus != 3')
    assert [ad["ClusterId"] for ad in kept] == [copied.cluster_id]
    held.refresh_from_db()
    lost.refresh_from_db()
    assert held.state == JobState.HELD
    assert held.hold_reason.startswith("held by an administrator")
    assert lost.state == JobState.FAILED

    out = StringIO()
    call_command("reconcile", "--dry-run", stdout=out)
    # Removed jobs may linger in the queue a moment as "removed"; they are not drift.
    assert "nothing to repair" in out.getvalue(), out.getvalue()
    actions.job_cancel(job=held, user=student)
    actions.job_cancel(job=copied, user=student)


def test_the_sync_removes_a_second_copy_and_keeps_the_recorded_one(own_instance, student):
    sleeper = script_upload("import time; time.sleep(600)\n")
    job = submission.job_submit(user=student, spec=specs.JobSpec(name="sent-twice"), script=sleeper)
    job = submission.job_submit_to_pool(job.pk)
    copy = get_bridge().submit(specs.job_request_of(job), check_existing=False)

    report = sync.jobs_sync()

    assert report.second_copies_removed == 1
    wait_for(
        lambda: (
            not [ad for ad in in_queue(f"ClusterId == {copy.cluster_id}") if ad["JobStatus"] != 3]
        ),
        timeout=60,
        what="the copy to leave the pool",
    )
    kept = in_queue(f'NightshiftJobId == "{job.public_id}" && JobStatus != 3')
    assert [ad["ClusterId"] for ad in kept] == [job.cluster_id]
    assert job.events.filter(kind="second copy removed").exists()
    assert sync.jobs_sync().second_copies_removed == 0
    actions.job_cancel(job=job, user=student)
