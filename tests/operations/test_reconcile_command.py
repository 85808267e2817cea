"""`manage.py reconcile`: every kind of drift between the portal and the schedd is found,
listed by --dry-run without a change, and repaired by a real run; a second run finds none."""

import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from audit.models import AuditEntry
from condor_bridge import JobRequest
from condor_bridge import JobState as CondorState
from jobs import specs, submission
from jobs.models import Job, JobState
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db


def reconcile(*args: str) -> str:
    out = StringIO()
    call_command("reconcile", *args, stdout=out)
    return out.getvalue()


def accepted(student, name: str) -> Job:
    return submission.job_submit(
        user=student, spec=specs.JobSpec(name=name), script=script_upload()
    )


def in_pool(student, name: str) -> Job:
    job = accepted(student, name)
    submission.job_submit_to_pool(job.pk)
    job.refresh_from_db()
    return job


@pytest.fixture
def drifted(student, fake_bridge, tmp_path):
    """One job of every kind of drift, and one that is fine."""
    stranger = str(uuid.uuid4())
    fake_bridge.submit(JobRequest(job_id=stranger, job_dir=str(tmp_path), script_name="x.py"))
    ended = in_pool(student, "ended")
    Job.objects.filter(pk=ended.pk).update(state=JobState.REMOVED)
    unrecorded = accepted(student, "unrecorded")
    fake_bridge.submit(specs.job_request_of(unrecorded))
    Job.objects.filter(pk=unrecorded.pk).update(submit_attempts=1)
    stale = in_pool(student, "stale")
    fake_bridge.set_state(str(stale.public_id), CondorState.HELD, hold_reason="disk quota")
    lost = accepted(student, "lost")
    Job.objects.filter(pk=lost.pk).update(cluster_id=987654, proc_id=0, state=JobState.RUNNING)
    unsent = accepted(student, "unsent")
    Job.objects.filter(pk=unsent.pk).update(created_at=timezone.now() - timedelta(hours=1))
    copied = in_pool(student, "copy")
    fake_bridge.submit(specs.job_request_of(copied), check_existing=False)  # sent twice
    fine = in_pool(student, "fine")
    return {
        "unknown": stranger,
        "ended": ended,
        "unrecorded": unrecorded,
        "stale": stale,
        "lost": lost,
        "unsent": unsent,
        "copy": copied,
        "fine": fine,
    }


def test_a_dry_run_lists_every_drift_and_changes_nothing(drifted, fake_bridge):
    before = list(Job.objects.order_by("pk").values_list("state", "cluster_id"))
    said = reconcile("--dry-run")
    for kind, job in drifted.items():
        job_id = job if isinstance(job, str) else str(job.public_id)
        lines = [line for line in said.splitlines() if job_id in line]
        if kind == "fine":
            assert lines == []
        else:
            assert len(lines) == 1 and lines[0].startswith(kind), (kind, said)
            assert " would be " in lines[0]
    assert "7 differences found; run without --dry-run" in said
    assert list(Job.objects.order_by("pk").values_list("state", "cluster_id")) == before
    assert fake_bridge.actions == []
    assert not AuditEntry.objects.filter(action="portal.reconcile").exists()


def test_a_run_repairs_each_drift_and_a_second_run_finds_none(drifted, fake_bridge):
    said = reconcile()
    assert "7 differences repaired." in said
    copied = drifted["copy"]
    copies = [
        (o.cluster_id, o.state)
        for o in fake_bridge.active_jobs()
        if o.job_id == str(copied.public_id)
    ]
    assert copies == [(copied.cluster_id, CondorState.IDLE)]
    removed = {(a[0], a[1]) for a in fake_bridge.actions}
    assert ("remove", drifted["ended"].cluster_id) in removed
    assert fake_bridge.find(drifted["unknown"]).state is CondorState.REMOVED
    for name in ("unrecorded", "unsent"):
        drifted[name].refresh_from_db()
        assert drifted[name].cluster_id is not None, name
    stale, lost = drifted["stale"], drifted["lost"]
    stale.refresh_from_db()
    lost.refresh_from_db()
    assert (stale.state, stale.hold_reason) == (JobState.HELD, "disk quota")
    assert lost.state == JobState.FAILED
    assert "no record of this job" in lost.status_detail
    assert lost.events.filter(kind="lost").exists()
    # The unrecorded job was adopted, not submitted twice.
    unrecorded_copies = [
        o for o in fake_bridge.active_jobs() if o.job_id == str(drifted["unrecorded"].public_id)
    ]
    assert len(unrecorded_copies) == 1
    audit = AuditEntry.objects.get(action="portal.reconcile")
    assert "1 unknown" in audit.detail and "1 lost" in audit.detail
    assert reconcile() == "The portal and the schedd agree: nothing to repair.\n"


def test_a_finished_job_waiting_in_the_queue_for_its_outputs_is_left_alone(student, fake_bridge):
    """Spool mode: a completed job stays in the queue until the portal fetches its outputs."""
    done = in_pool(student, "done")
    fake_bridge.set_state(str(done.public_id), CondorState.COMPLETED, exit_code=0, in_queue=True)
    Job.objects.filter(pk=done.pk).update(state=JobState.COMPLETED)
    assert "nothing to repair" in reconcile()
    assert fake_bridge.actions == []


def test_an_agreeing_portal_and_pool_need_nothing(student, fake_bridge):
    in_pool(student, "fine")
    assert "nothing to repair" in reconcile("--dry-run")
