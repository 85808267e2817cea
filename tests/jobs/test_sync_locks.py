"""The sync's row locks never wait on another transaction's foreign-key checks.

A statement that inserts rows referencing many jobs (a beat's usage samples, one for every
running job) checks its foreign keys when it commits, taking a key-share lock on each job in
turn. A sync that locked its jobs FOR UPDATE waited on those locks while the insert waited on
the sync's: PostgreSQL found the deadlock and killed one of them (CI saw it, in
tests/faults/test_overlapping_sync.py). Here another connection holds exactly those key-share
locks, and the sync must go through without waiting for them at all.
"""

from datetime import UTC, datetime

import psycopg2
import pytest
from django.db import connection

from condor_bridge import JobObservation
from condor_bridge import JobState as Condor
from jobs import sync
from jobs.models import Job, JobState
from tests.factories import LabFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def jobs():
    owner, lab = UserFactory(), LabFactory()
    return [
        Job.objects.create(
            owner=owner,
            lab=lab,
            name=f"train {n}",
            gpus=1,
            output_dir="/none",
            state=JobState.IDLE,
            cluster_id=100 + n,
            proc_id=0,
            request={"gpus": 1},
        )
        for n in range(3)
    ]


def started(job: Job) -> JobObservation:
    return JobObservation(
        job_id=str(job.public_id),
        cluster_id=job.cluster_id,
        proc_id=0,
        state=Condor.RUNNING,
        in_queue=True,
        num_starts=1,
        workstation="ws-volta",
        run_started_at=datetime(2026, 12, 2, 9, tzinfo=UTC),
        entered_state_at=datetime(2026, 12, 2, 9, tzinfo=UTC),
        gpus_assigned=1,
    )


@pytest.fixture
def key_share_holder(jobs):
    """Another session holding key-share locks on the jobs, as an insert's foreign-key
    checks do while it commits."""
    settings = connection.settings_dict
    other = psycopg2.connect(
        dbname=settings["NAME"],
        user=settings["USER"],
        password=settings["PASSWORD"],
        host=settings["HOST"],
        port=settings["PORT"],
    )
    with other.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM jobs_job WHERE id = ANY(%s) FOR KEY SHARE", ([job.pk for job in jobs],)
        )
    yield other
    other.rollback()
    other.close()


def test_the_sync_applies_its_changes_while_foreign_key_checks_hold_the_jobs(
    jobs, key_share_holder
):
    with connection.cursor() as cursor:
        # Waiting at all would fail the test at once, instead of hanging until the holder ends.
        cursor.execute("SET lock_timeout = '1s'")
    try:
        changed = sync.jobs_apply_observations({job.pk: started(job) for job in jobs})
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
    assert changed == {job.pk for job in jobs}
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.RUNNING}
