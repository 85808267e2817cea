"""plumbing.db.instances_of: rows as model instances built from values, some fields loaded
and the rest loading on first access, as Django's own would."""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import Job, JobState
from plumbing.db import instances_of
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def make_job(**fields) -> Job:
    return Job.objects.create(
        owner=UserFactory(),
        name="a job",
        output_dir="/tmp/a-job",
        request={"gpus": 2, "live_services": ["tensorboard"]},
        **fields,
    )


def test_loaded_fields_read_as_django_reads_them_in_one_query():
    job = make_job(
        state=JobState.HELD, hold_reason="Out of memory", num_starts=3, public_id=uuid.uuid4()
    )
    expected = Job.objects.get(pk=job.pk)

    with CaptureQueriesContext(connection) as queries:
        [instance] = instances_of(
            Job.objects.filter(pk=job.pk),
            ["state", "hold_reason", "num_starts", "public_id", "owner", "created_at", "request"],
        )
        values = (
            instance.pk,
            instance.state,
            instance.hold_reason,
            instance.num_starts,
            instance.public_id,
            instance.owner_id,
            instance.created_at,
            instance.request,
        )

    assert len(queries) == 1
    assert values == (
        expected.pk,
        expected.state,
        expected.hold_reason,
        expected.num_starts,
        expected.public_id,
        expected.owner_id,
        expected.created_at,
        expected.request,
    )
    assert instance == expected
    assert not instance._state.adding
    assert instance._state.db == "default"


def test_a_field_not_loaded_loads_when_asked_for():
    job = make_job()
    [instance] = instances_of(Job.objects.filter(pk=job.pk), ["state"])

    assert instance.get_deferred_fields() >= {"request", "output_dir", "name"}
    with CaptureQueriesContext(connection) as queries:
        assert instance.live_services == ("tensorboard",)
    assert len(queries) == 1


def test_an_instance_saves_only_what_it_loaded_and_leaves_the_rest():
    job = make_job(num_starts=1)
    [instance] = instances_of(Job.objects.filter(pk=job.pk), ["state", "num_starts"])
    instance.num_starts = 4
    instance.save()

    job.refresh_from_db()
    assert (job.num_starts, job.name, job.request["gpus"]) == (4, "a job", 2)


def test_rows_come_in_the_querysets_order_and_none_when_nothing_matches():
    first, second = make_job(), make_job()
    ordered = instances_of(
        Job.objects.filter(pk__in=[first.pk, second.pk]).order_by("-pk"), ["name"]
    )

    assert [instance.pk for instance in ordered] == [second.pk, first.pk]
    assert instances_of(Job.objects.none(), ["name"]) == []


def test_the_key_may_be_named_as_pk_or_by_its_name_and_is_read_once():
    job = make_job()
    [by_pk] = instances_of(Job.objects.filter(pk=job.pk), ["pk", "name"])
    [by_name] = instances_of(Job.objects.filter(pk=job.pk), ["id", "name"])

    assert (by_pk.pk, by_pk.name) == (by_name.pk, by_name.name) == (job.pk, "a job")
