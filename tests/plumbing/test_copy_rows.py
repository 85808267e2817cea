"""plumbing.db.copy_insert and copy_update: many rows through COPY, stored exactly as
save() would store them, whatever their text."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import Job, JobEvent, JobState
from plumbing.db import copy_insert, copy_update
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

# What COPY's text format treats specially, and what SQL would.
HOSTILE = "tab\there\nnew line\r\\N \\. back\\slash '); DELETE FROM jobs_job; -- %s ünïcode"


def test_inserted_rows_read_back_as_save_would_have_written_them():
    owner = UserFactory()
    saved = Job.objects.create(
        owner=owner,
        name="saved",
        output_dir="/x",
        request={"memory_mb": 256},
        parameters={"lr": 0.1},
    )
    copied = Job(
        owner=owner,
        name="copied",
        output_dir="/x",
        request={"memory_mb": 256},
        parameters={"lr": 0.1},
    )

    copy_insert(Job, [copied])

    assert copied.pk is not None and copied.pk != saved.pk
    columns = [
        "name",
        "state",
        "outcome",
        "request",
        "parameters",
        "source",
        "schedd",
        "pool",
        "live_secret",
        "cluster_id",
        "notify_by_email",
        "num_starts",
        "sweep_index",
    ]
    read = Job.objects.values(*columns)
    assert read.get(pk=copied.pk) == {**read.get(pk=saved.pk), "name": "copied"}
    assert Job.objects.get(pk=copied.pk).created_at is not None
    assert Job.objects.get(pk=copied.pk).public_id == copied.public_id


def test_text_that_copy_or_sql_would_read_specially_is_stored_literally():
    owner = UserFactory()
    job = Job(owner=owner, name=HOSTILE, output_dir="/x", parameters={"p": HOSTILE})
    copy_insert(Job, [job])
    copy_insert(JobEvent, [JobEvent(job=job, kind="created", detail=HOSTILE)])

    stored = Job.objects.get()
    assert (stored.name, stored.parameters) == (HOSTILE, {"p": HOSTILE})
    assert JobEvent.objects.get().detail == HOSTILE


def test_json_that_is_a_string_or_a_number_stays_json_of_that_kind():
    owner = UserFactory()
    jobs = [
        Job(owner=owner, name=str(n), output_dir="/x", parameters=value)
        for n, value in enumerate(["123", "plain text", 7, [1, "a"]])
    ]
    copy_insert(Job, jobs)
    stored = list(Job.objects.order_by("pk").values_list("parameters", flat=True))
    assert stored == ["123", "plain text", 7, [1, "a"]]


def test_the_new_keys_can_be_referred_to_at_once():
    owner = UserFactory()
    jobs = [Job(owner=owner, name=f"run {n}", output_dir="/x") for n in range(50)]
    copy_insert(Job, jobs)
    copy_insert(JobEvent, [JobEvent(job=job, kind="created", actor=owner) for job in jobs])

    assert sorted(job.pk for job in jobs) == list(
        Job.objects.order_by("pk").values_list("pk", flat=True)
    )
    assert all(
        event.job.name == f"run {event.job.pk - jobs[0].pk}" for event in JobEvent.objects.all()
    )


def test_thousands_of_rows_take_two_statements():
    owner = UserFactory()
    jobs = [Job(owner=owner, name=f"run {n}", output_dir="/x") for n in range(3000)]
    with CaptureQueriesContext(connection) as queries:
        copy_insert(Job, jobs)
    assert len(queries) == 2  # the keys, and the COPY
    assert Job.objects.count() == 3000


def test_an_update_writes_each_rows_own_values_and_leaves_other_fields_alone():
    owner = UserFactory()
    jobs = [
        Job(owner=owner, name=f"run {n}", output_dir="/x", hold_reason="kept") for n in range(3)
    ]
    copy_insert(Job, jobs)
    moment = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
    values = [
        (JobState.IDLE, 7, moment, HOSTILE),
        (JobState.HELD, None, None, ""),
        (JobState.RUNNING, 0, moment, "%s"),
    ]
    for job, row in zip(jobs, values, strict=True):
        job.state, job.cluster_id, job.submitted_at, job.submit_description = row

    assert (
        copy_update(Job, jobs, ["state", "cluster_id", "submitted_at", "submit_description"]) == 3
    )

    stored = list(
        Job.objects.order_by("pk").values_list(
            "state", "cluster_id", "submitted_at", "submit_description", "hold_reason"
        )
    )
    assert stored == [(*row, "kept") for row in values]


def test_an_update_can_run_twice_in_one_transaction():
    owner = UserFactory()
    jobs = [Job(owner=owner, name="run", output_dir="/x")]
    copy_insert(Job, jobs)
    jobs[0].num_starts = 1
    copy_update(Job, jobs, ["num_starts"])
    jobs[0].num_starts = 2
    copy_update(Job, jobs, ["num_starts"])
    assert Job.objects.get().num_starts == 2


def test_nothing_to_write_sends_nothing():
    with CaptureQueriesContext(connection) as queries:
        copy_insert(Job, [])
        assert copy_update(Job, [], ["state"]) == 0
    assert len(queries) == 0
