"""plumbing.db.new_instances: many unsaved instances, each what Model(**common, **row)
would make, with Model.__init__ run once."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import Job, JobState
from plumbing.db import copy_insert, new_instances
from tests.factories import LabFactory, UserFactory

pytestmark = pytest.mark.django_db

COMPUTED = {"public_id", "request", "source", "parameters"}


def fields_of(job: Job, leave_out=()) -> dict:
    return {
        field.attname: getattr(job, field.attname)
        for field in Job._meta.concrete_fields
        if field.name not in leave_out
    }


def test_each_instance_is_what_the_model_would_make_from_the_same_fields():
    owner, lab = UserFactory(), LabFactory()
    rows = [{"name": f"run {n}", "sweep_index": n, "parameters": {"lr": n}} for n in range(3)]

    made = new_instances(Job, rows, owner=owner, lab=lab, gpus=2, schedd="ap2")

    for job, row in zip(made, rows, strict=True):
        expected = Job(owner=owner, lab=lab, gpus=2, schedd="ap2", **row)
        assert fields_of(job, leave_out={"public_id"}) == fields_of(expected, {"public_id"})
        assert job._state.adding and job._state.db is None


def test_defaults_computed_by_a_function_are_computed_for_each_instance():
    made = new_instances(Job, [{"name": "a"}, {"name": "b"}], owner=UserFactory())

    assert made[0].public_id != made[1].public_id
    made[0].request["gpus"] = 1
    assert made[1].request == {} and made[1].source == {}


def test_related_objects_given_once_are_known_to_every_instance_without_a_query():
    owner = UserFactory()
    made = new_instances(Job, [{"name": "a"}, {"name": "b"}], owner=owner)

    with CaptureQueriesContext(connection) as queries:
        owners = [job.owner for job in made]

    assert owners == [owner, owner] and not queries


def test_the_instances_store_as_the_models_own_would():
    owner = UserFactory()
    [made] = new_instances(
        Job, [{"name": "copied", "state": JobState.HELD}], owner=owner, output_dir="/x"
    )
    Job.objects.create(owner=owner, output_dir="/x", name="saved", state=JobState.HELD)

    copy_insert(Job, [made])

    leave_out = {"id", "public_id", "name", "created_at", "updated_at"}
    stored = {job.name: fields_of(job, leave_out) for job in Job.objects.all()}
    assert stored["copied"] == stored["saved"]


@pytest.mark.parametrize("name", ["owner", "no_such_field"])
def test_a_row_may_name_only_plain_fields(name):
    with pytest.raises(TypeError, match=name):
        new_instances(Job, [{name: 1}], owner=UserFactory())
