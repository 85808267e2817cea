"""The sync's read of the active jobs' rows reads again only the rows that changed, by
PostgreSQL's row version, and never hands back a row as it was before a committed change.

These tests commit (transaction=True), as the worker does: within one open transaction the
row versions prove nothing, and every row is read (the last test)."""

import pytest
from django.db import transaction

from jobs.models import Job, JobState
from jobs.sync_compare import ActiveRows, sync_row

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def active_jobs(student):
    return [
        Job.objects.create(
            owner=student,
            name=f"train {n}",
            state=JobState.IDLE,
            cluster_id=10 + n,
            proc_id=0,
            schedd="ap1",
        )
        for n in range(3)
    ]


def rows_by_pk(rows) -> dict:
    return {row.pk: row for row in rows}


def test_a_second_read_with_nothing_changed_reads_only_the_row_versions(
    active_jobs, django_assert_num_queries
):
    rows = ActiveRows()
    first = rows_by_pk(rows.read())
    with django_assert_num_queries(1):
        again = rows_by_pk(rows.read())
    assert again == first == {job.pk: sync_row(job) for job in active_jobs}


def test_a_row_changed_by_a_bulk_update_is_read_afresh(active_jobs, django_assert_num_queries):
    rows = ActiveRows()
    rows.read()
    changed = active_jobs[1]
    Job.objects.filter(pk=changed.pk).update(state=JobState.RUNNING, workstation="ws-02")
    with django_assert_num_queries(2):
        again = rows_by_pk(rows.read())
    assert (again[changed.pk].state, again[changed.pk].workstation) == ("running", "ws-02")
    assert again[active_jobs[0].pk].state == JobState.IDLE


def test_a_row_saved_with_the_same_values_is_still_read_afresh(active_jobs):
    rows = ActiveRows()
    rows.read()
    Job.objects.filter(pk=active_jobs[0].pk).update(status_detail="Waiting for a GPU")
    Job.objects.filter(pk=active_jobs[0].pk).update(status_detail="")
    assert rows_by_pk(rows.read())[active_jobs[0].pk] == sync_row(active_jobs[0])


def test_jobs_that_ended_or_were_submitted_since_come_and_go(active_jobs, student):
    rows = ActiveRows()
    rows.read()
    Job.objects.filter(pk=active_jobs[2].pk).update(state=JobState.COMPLETED)
    new = Job.objects.create(
        owner=student, name="new", state=JobState.IDLE, cluster_id=99, proc_id=0, schedd="ap2"
    )
    assert set(rows_by_pk(rows.read())) == {active_jobs[0].pk, active_jobs[1].pk, new.pk}


def test_within_one_open_transaction_every_row_is_read(active_jobs):
    rows = ActiveRows()
    with transaction.atomic():
        Job.objects.filter(pk=active_jobs[0].pk).update(state=JobState.RUNNING)
        rows.read()
        # The same transaction writes this version too: its stamp is the one just read.
        Job.objects.filter(pk=active_jobs[0].pk).update(state=JobState.HELD)
        assert rows_by_pk(rows.read())[active_jobs[0].pk].state == JobState.HELD
