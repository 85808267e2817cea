"""The sync records usage from the bridge's ads, once, however its ticks overlap."""

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from accounting.models import UsageRecord
from condor_bridge import JobState as CondorState
from jobs import specs, submission, sync
from tests.conftest import script_upload

T0 = datetime(2026, 11, 2, 21, 0, tzinfo=UTC)


def submit(user, **spec):
    spec.setdefault("name", "train")
    job = submission.job_submit(user=user, spec=specs.JobSpec(**spec), script=script_upload())
    return submission.job_submit_to_pool(job.pk)


@pytest.mark.django_db
def test_runs_on_the_bridge_become_records_that_add_up_to_htcondors_wall_time(student, fake_bridge):
    job = submit(student, gpus=2)
    job_id = str(job.public_id)
    fake_bridge.set_state(job_id, CondorState.RUNNING, at=T0)
    sync.jobs_sync()
    assert [(r.workstation, r.gpus, r.is_open) for r in UsageRecord.objects.all()] == [
        ("ws-volta", 2, True)
    ]
    fake_bridge.set_state(job_id, CondorState.IDLE, at=T0 + timedelta(minutes=20))
    sync.jobs_sync()
    fake_bridge.set_state(job_id, CondorState.RUNNING, at=T0 + timedelta(minutes=25))
    fake_bridge.set_state(job_id, CondorState.COMPLETED, at=T0 + timedelta(minutes=55), exit_code=0)
    sync.jobs_sync()
    records = list(UsageRecord.objects.order_by("started_at"))
    assert [(r.wall_s, r.committed_s, r.badput_s, r.ended_by) for r in records] == [
        (1200, 0, 1200, "evicted"),
        (1800, 1800, 0, "completed"),
    ]
    final = fake_bridge.find(job_id)
    assert sum(r.gpu_hours() for r in records) == pytest.approx(final.wall_time_s * 2 / 3600)
    assert all(r.user == student and r.lab_id == job.lab_id for r in records)


@pytest.mark.django_db
def test_a_sync_with_nothing_new_writes_no_usage(student, fake_bridge):
    job = submit(student, gpus=1)
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING)
    sync.jobs_sync()
    assert sync.jobs_sync().changed == 0
    assert UsageRecord.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_overlapping_sync_ticks_record_each_run_once(student, fake_bridge):
    jobs = [submit(student, gpus=1, name=f"j{i}") for i in range(6)]
    for job in jobs:
        fake_bridge.set_state(str(job.public_id), CondorState.RUNNING, at=T0)
        fake_bridge.set_state(str(job.public_id), CondorState.IDLE, at=T0 + timedelta(hours=1))
    barrier = threading.Barrier(2)
    errors = []

    def tick():
        try:
            barrier.wait()
            sync.jobs_sync()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=tick) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(UsageRecord.objects.values_list("job_id", "wall_s")) == sorted(
        (job.pk, 3600.0) for job in jobs
    )


@pytest.mark.django_db
def test_a_run_that_flocked_is_recorded_against_the_pool_it_ran_in(student, fake_bridge):
    job = submit(student, gpus=1)
    job_id = str(job.public_id)
    other_pool = "cm.physics.example.edu:9618"
    fake_bridge.set_state(job_id, CondorState.RUNNING, at=T0)
    fake_bridge.set_state(job_id, CondorState.IDLE, at=T0 + timedelta(minutes=10))
    fake_bridge.set_state(
        job_id, CondorState.RUNNING, at=T0 + timedelta(minutes=12), pool=other_pool
    )
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.pool == other_pool
    assert job.ran_on == f"{job.workstation} (in the pool at {other_pool})"
    fake_bridge.set_state(job_id, CondorState.COMPLETED, at=T0 + timedelta(minutes=40), exit_code=0)
    sync.jobs_sync()
    records = UsageRecord.objects.order_by("started_at")
    assert [(r.pool, r.ended_by) for r in records] == [("", "evicted"), (other_pool, "completed")]


@pytest.mark.django_db
def test_a_flocked_run_seen_only_once_it_ended_is_recorded_against_its_pool(student, fake_bridge):
    job = submit(student, gpus=1)
    job_id = str(job.public_id)
    fake_bridge.set_state(job_id, CondorState.RUNNING, at=T0, pool="cm.physics.example.edu:9618")
    fake_bridge.set_state(job_id, CondorState.COMPLETED, at=T0 + timedelta(minutes=5), exit_code=0)
    sync.jobs_sync()
    [record] = UsageRecord.objects.all()
    assert (record.pool, record.wall_s) == ("cm.physics.example.edu:9618", 300)
    job.refresh_from_db()
    assert job.pool == "cm.physics.example.edu:9618"


def usage_record_reads(cycle) -> int:
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        cycle()
    return sum(UsageRecord._meta.db_table in q["sql"] for q in queries.captured_queries)


@pytest.mark.django_db
def test_jobs_that_never_started_cost_the_ledger_no_query_while_nothing_changes(
    student, fake_bridge
):
    """A large queue mostly waits: its jobs have no run to record, and a cycle with nothing
    new reads no usage record for them; a job that runs is still checked each cycle."""
    waiting = [submit(student, gpus=1, name=f"w{i}") for i in range(3)]
    sync.jobs_sync()
    assert usage_record_reads(sync.jobs_sync) == 0
    fake_bridge.set_state(str(waiting[0].public_id), CondorState.RUNNING, at=T0)
    sync.jobs_sync()
    assert usage_record_reads(sync.jobs_sync) == 1
    assert UsageRecord.objects.count() == 1
