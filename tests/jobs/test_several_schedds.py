"""Several access points, on one fake bridge per schedd: where each job goes, that every
action reaches its schedd, and that a schedd that does not answer stops only its own jobs."""

import pytest
from django.core.exceptions import ValidationError

from condor_bridge import BridgeError
from condor_bridge import JobState as CondorState
from condor_bridge.live import forward_command, probe_command
from condor_bridge.types import SCHEDD_NAME_PATTERN
from jobs import actions, schedulers, specs, submission, sync
from jobs.bridge import get_bridge
from jobs.models import JobState
from operations.reconcile import reconcile
from tests.conftest import script_upload
from tests.factories import LabFactory, MembershipFactory

pytestmark = pytest.mark.django_db

AP1, AP2 = "ap1@campus.example", "ap2@campus.example"


@pytest.fixture
def two_schedds(settings, fake_bridge):
    settings.CONDOR_SCHEDDS = [AP1, AP2]
    return get_bridge(AP1), get_bridge(AP2)


def submitted(user, **spec):
    spec.setdefault("name", "a job")
    job = submission.job_submit(user=user, spec=specs.JobSpec(**spec), script=script_upload())
    return submission.job_submit_to_pool(job.pk)


def test_the_least_loaded_schedd_gets_each_new_job(student, two_schedds):
    ap1, ap2 = two_schedds
    jobs = [submitted(student) for _ in range(4)]
    assert [job.schedd for job in jobs] == [AP1, AP2, AP1, AP2]
    assert sorted(ap1.submitted) == sorted(str(j.public_id) for j in jobs if j.schedd == AP1)
    assert sorted(ap2.submitted) == sorted(str(j.public_id) for j in jobs if j.schedd == AP2)


def test_a_finished_job_no_longer_counts_as_load(student, two_schedds):
    first = submitted(student)
    actions.job_cancel(job=first, user=student)
    get_bridge(AP1).set_state(str(first.public_id), CondorState.REMOVED)
    sync.jobs_sync()
    assert submitted(student).schedd == AP1


def test_per_lab_each_lab_keeps_to_its_schedd_and_a_lab_without_one_takes_the_least_loaded(
    settings, student, other_student, two_schedds
):
    settings.SCHEDD_POLICY = "per-lab"
    vision = LabFactory(name="Vision", schedd=AP2)
    MembershipFactory(lab=vision, user=student)
    MembershipFactory(lab=LabFactory(name="Robotics"), user=other_student)
    assert [submitted(student).schedd for _ in range(3)] == [AP2, AP2, AP2]
    assert submitted(other_student).schedd == AP1


def test_a_lab_may_name_only_a_schedd_the_portal_uses(settings):
    settings.CONDOR_SCHEDDS = [AP1, AP2]
    lab = LabFactory.build(name="Vision", accounting_group="group_vision")
    lab.schedd = "ap9@elsewhere"
    with pytest.raises(ValidationError, match="not one of the portal's schedds"):
        lab.full_clean()
    lab.schedd = 'ap1" || true'
    with pytest.raises(ValidationError, match="collector knows"):
        lab.full_clean()
    lab.schedd = AP2
    lab.full_clean()


def test_hold_release_and_cancel_reach_the_jobs_own_schedd(student, two_schedds):
    ap1, ap2 = two_schedds
    submitted(student)
    job = submitted(student)
    assert job.schedd == AP2
    actions.job_hold(job=job, user=student)
    ap2.set_state(str(job.public_id), CondorState.HELD)
    sync.jobs_sync()
    job.refresh_from_db()
    actions.job_release(job=job, user=student)
    actions.job_cancel(job=job, user=student)
    assert [action for action, *_ in ap2.actions] == ["hold", "release", "remove"]
    assert ap1.actions == []


def test_a_schedd_that_does_not_answer_stops_only_its_own_jobs(client, student, two_schedds):
    ap1, ap2 = two_schedds
    on_ap1, on_ap2 = submitted(student), submitted(student)
    ap1.down = True
    ap1.set_state(str(on_ap1.public_id), CondorState.RUNNING)
    ap2.set_state(str(on_ap2.public_id), CondorState.RUNNING)
    sync.jobs_sync()
    on_ap1.refresh_from_db()
    on_ap2.refresh_from_db()
    assert (on_ap1.state, on_ap2.state) == (JobState.IDLE, JobState.RUNNING)
    client.force_login(student)
    page = client.get(f"/jobs/{on_ap1.public_id}/").content.decode()
    assert f"Scheduler {AP1} is not answering (just now)" in page
    assert "is not answering (" not in client.get(f"/jobs/{on_ap2.public_id}/").content.decode()
    status = client.get(f"/jobs/{on_ap1.public_id}/status.json").json()
    assert status["schedd_problem"].startswith(f"Scheduler {AP1} is not answering")

    ap1.down = False  # it comes back: its job catches up and the page stops warning
    sync.jobs_sync()
    on_ap1.refresh_from_db()
    assert on_ap1.state == JobState.RUNNING
    assert client.get(f"/jobs/{on_ap1.public_id}/status.json").json()["schedd_problem"] == ""


def test_the_sync_fails_when_no_schedd_answers(student, two_schedds):
    submitted(student), submitted(student)
    for bridge in two_schedds:
        bridge.down = True
    with pytest.raises(BridgeError):
        sync.jobs_sync()


def test_the_sync_asks_each_schedd_once_for_its_queue(student, two_schedds, monkeypatch):
    asked = []
    for bridge in two_schedds:
        original = bridge.active_jobs
        monkeypatch.setattr(
            bridge,
            "active_jobs",
            lambda original=original, name=bridge.schedd_name: asked.append(name) or original(),
        )
    submitted(student), submitted(student), submitted(student)
    sync.jobs_sync()
    assert sorted(asked) == [AP1, AP2]


def test_reconcile_removes_a_job_the_portal_does_not_know_from_the_schedd_that_has_it(
    student, two_schedds
):
    ap1, ap2 = two_schedds
    submitted(student)
    stray = submitted(student)
    stray.delete()
    drifts = reconcile(dry_run=False)
    assert [(d.kind, d.job_id) for d in drifts] == [("unknown", str(stray.public_id))]
    assert [action for action, *_ in ap2.actions] == ["remove"]
    assert ap1.actions == []


def test_a_remote_schedd_takes_its_jobs_files_by_spool(settings, student, two_schedds):
    settings.CONDOR_SPOOL_SCHEDDS = [AP2]
    submitted(student)
    job = submitted(student)
    assert get_bridge(AP2).submitted[str(job.public_id)].get("should_transfer_files") == "YES"
    assert get_bridge(AP2).mode.value == "spool" and get_bridge(AP1).mode.value == "shared"


def test_discovered_schedds_come_from_the_collector(settings, fake_bridge):
    settings.CONDOR_DISCOVER_SCHEDDS = True
    assert schedulers.schedd_names() == [fake_bridge.schedd_name]


def test_one_schedd_portals_keep_sending_to_the_default(student, fake_bridge):
    job = submitted(student)
    assert job.schedd == ""
    assert str(job.public_id) in fake_bridge.submitted


def test_the_tunnel_to_a_job_names_its_schedd_and_nothing_else_gets_through():
    assert probe_command(["condor_ssh_to_job"], 7, 0, schedd=AP2)[1:4] == [
        "-auto-retry",
        "-name",
        AP2,
    ]
    assert forward_command(["condor_ssh_to_job"], 7, 0, {"/tmp/a.sock": 6006}, schedd=AP2)[1:3] == [
        "-name",
        AP2,
    ]
    for hostile in ("-ssh evil", "ap1; rm -rf /", "ap1\n", "../ap1"):
        with pytest.raises(ValueError):
            probe_command(["condor_ssh_to_job"], 7, 0, schedd=hostile)


def test_the_settings_check_schedd_names_as_the_bridge_does():
    from django.conf import settings

    assert settings.SCHEDD_NAME_PATTERN.pattern == SCHEDD_NAME_PATTERN.pattern
