"""Work lost when a workstation's owner asked for it back is not charged to the student's
quota: the beat forgives each such run's lost work, says so on the job's timeline and in the
audit log, and the quota and the usage report count the rest."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounting.models import UsageRecord
from accounting.periods import period_between
from accounting.reports import Scope, usage_by_group
from accounting.selectors import gpu_hours_used
from audit.models import AuditEntry
from jobs.models import Job, JobState
from lending.services import reclaim_relief_apply, reclaim_request
from lending.tasks import relieve_reclaimed_work
from portal.beat import beat_schedule
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def evicted_run(student, workstation, ended_at, *, wall_s=3600, badput_s=600, gpus=2):
    job = Job.objects.create(owner=student, name="train", state=JobState.IDLE)
    return UsageRecord.objects.create(
        job=job,
        user=student,
        started_at=ended_at - timedelta(seconds=wall_s),
        ended_at=ended_at,
        workstation=workstation,
        gpus=gpus,
        wall_s=wall_s,
        committed_s=wall_s - badput_s,
        badput_s=badput_s,
        ended_by=UsageRecord.Ending.EVICTED,
    )


@pytest.fixture
def asked_back():
    """ws-volta's owner asked for it back ten minutes ago, within five minutes."""
    owner = UserFactory(username="prof", is_staff=True)
    asked_at = timezone.now() - timedelta(minutes=10)
    return reclaim_request(user=owner, workstation="ws-volta", minutes=5, now=asked_at)


def test_the_work_a_reclaim_lost_is_not_charged_and_the_student_is_told(student, asked_back):
    run = evicted_run(student, "ws-volta", asked_back.deadline - timedelta(seconds=20))
    window = {"since": run.started_at - timedelta(hours=1), "until": timezone.now()}
    charged_before = gpu_hours_used(UsageRecord.objects.filter(user=student), **window).total
    assert charged_before == pytest.approx(2.0)  # an hour on 2 GPUs

    assert reclaim_relief_apply() == 1
    run.refresh_from_db()
    assert run.forgiven_s == 600
    charged = gpu_hours_used(UsageRecord.objects.filter(user=student), **window).total
    assert charged == pytest.approx(2.0 - 2 * 600 / 3600)  # its 10 lost minutes, on 2 GPUs
    said = run.job.events.get(kind="not charged").detail
    assert said == (
        "The 10 min of work lost when ws-volta's owner asked for it back (0.33 GPU-hours) "
        "is not charged to your quota."
    )
    assert AuditEntry.objects.filter(action="lending.relief").count() == 1
    # The next beat finds nothing more to forgive.
    assert reclaim_relief_apply() == 0


def test_evictions_the_owner_did_not_ask_for_are_charged(student, asked_back):
    before_asking = evicted_run(student, "ws-volta", asked_back.requested_at - timedelta(hours=1))
    elsewhere = evicted_run(student, "ws-ampere", asked_back.deadline)
    assert reclaim_relief_apply() == 0
    for run in (before_asking, elsewhere):
        run.refresh_from_db()
        assert run.forgiven_s == 0


def test_the_usage_report_charges_as_the_quota_does_and_shows_what_was_not_charged(
    student, asked_back
):
    evicted_run(student, "ws-volta", asked_back.deadline)
    reclaim_relief_apply()
    today = timezone.localdate()
    period = period_between(today - timedelta(days=1), today)
    [row] = usage_by_group(Scope(None, "everything"), period, "user").rows
    assert row["gpu_hours"] == pytest.approx(2 - 2 * 600 / 3600, abs=0.001)
    assert row["forgiven_gpu_hours"] == pytest.approx(2 * 600 / 3600, abs=0.001)
    assert row["badput_gpu_hours"] == pytest.approx(2 * 600 / 3600, abs=0.001)


def test_the_beat_runs_the_relief_every_five_minutes(student, asked_back):
    entry = beat_schedule(
        sync_s=3, study_s=10, usage_sample_s=30, start_prediction_s=60, capacity_sample_s=300
    )["relieve-reclaimed-work"]
    assert entry == {"task": "lending.tasks.relieve_reclaimed_work", "schedule": 300.0}
    evicted_run(student, "ws-volta", asked_back.deadline)
    assert relieve_reclaimed_work() == 1
