"""plumbing.db.bulk_update_rows: many rows, one statement per thousand, values as parameters."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import Job, JobState
from plumbing.db import bulk_update_rows
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

HOSTILE = "'); DELETE FROM jobs_job; -- %s %(x)s {rows} \\ \" ünïcode"


def make_jobs(count: int) -> list[Job]:
    owner = UserFactory()
    Job.objects.bulk_create(Job(owner=owner, name=f"job {n}") for n in range(count))
    return list(Job.objects.order_by("pk"))


def test_each_row_gets_its_own_values_including_nulls_and_times():
    jobs = make_jobs(3)
    moment = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
    values = [
        (JobState.RUNNING, 2, moment, None),
        (JobState.HELD, 0, None, 7),
        (JobState.IDLE, 5, moment, -1),
    ]
    for job, row in zip(jobs, values, strict=True):
        job.state, job.num_starts, job.started_at, job.exit_code = row

    assert bulk_update_rows(Job, jobs, ["state", "num_starts", "started_at", "exit_code"]) == 3

    stored = list(
        Job.objects.order_by("pk").values_list("state", "num_starts", "started_at", "exit_code")
    )
    assert stored == values


def test_fields_not_named_are_left_alone():
    [job] = make_jobs(1)
    Job.objects.filter(pk=job.pk).update(hold_reason="kept")
    job.state = JobState.RUNNING
    bulk_update_rows(Job, [job], ["state"])
    job.refresh_from_db()
    assert (job.state, job.hold_reason, job.name) == (JobState.RUNNING, "kept", "job 0")


def test_text_that_looks_like_sql_or_placeholders_is_stored_literally():
    jobs = make_jobs(2)
    for job in jobs:
        job.hold_reason = HOSTILE
        job.status_detail = "%s"
    bulk_update_rows(Job, jobs, ["hold_reason", "status_detail"])
    assert Job.objects.count() == 2
    assert set(Job.objects.values_list("hold_reason", "status_detail")) == {(HOSTILE, "%s")}


def test_json_that_is_a_bare_string_or_number_stays_json():
    """Plain strings and integers skip Django's preparing, except in a JSON field, where
    they are JSON values and must be encoded as such."""
    jobs = make_jobs(3)
    for job, value in zip(jobs, ["a plain string", 7, {"gpus": 1}], strict=True):
        job.request = value
    bulk_update_rows(Job, jobs, ["request"])
    assert list(Job.objects.order_by("pk").values_list("request", flat=True)) == [
        "a plain string",
        7,
        {"gpus": 1},
    ]


def test_thousands_of_rows_take_one_statement_per_thousand():
    jobs = make_jobs(2500)
    for job in jobs:
        job.num_starts = job.pk % 7
    with CaptureQueriesContext(connection) as queries:
        assert bulk_update_rows(Job, jobs, ["num_starts"]) == 2500
    assert len(queries) == 3
    assert all(starts == pk % 7 for pk, starts in Job.objects.values_list("pk", "num_starts"))


def test_nothing_to_write_sends_nothing():
    with CaptureQueriesContext(connection) as queries:
        assert bulk_update_rows(Job, [], ["state"]) == 0
    assert len(queries) == 0
