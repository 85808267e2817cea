"""A lab with a lead and two members, another lab's member, and jobs of theirs that ended
with output files and metrics, on the fake bridge (never the real pool, which another lane
of the tests may be restarting)."""

from dataclasses import dataclass

import pytest
from django.urls import reverse

from tests.conftest import client_with_token
from tests.factories import LabFactory, MembershipFactory, UserFactory

MODELS = reverse("api:model-list")


@dataclass
class People:
    lab: object
    lead: object
    student: object
    labmate: object
    outsider: object

    def api(self, user):
        return client_with_token(user)


@pytest.fixture
def people(db, fake_bridge):
    lab = LabFactory(name="Vision & Robotics")
    other_lab = LabFactory(name="Other Lab")
    lead, student, labmate, outsider = (
        UserFactory(username=name) for name in ("lead", "sam", "kim", "olga")
    )
    MembershipFactory(lab=lab, user=lead, role="lead")
    MembershipFactory(lab=lab, user=student)
    MembershipFactory(lab=lab, user=labmate)
    MembershipFactory(lab=other_lab, user=outsider)
    return People(lab, lead, student, labmate, outsider)


def publish(user, job, *, name="bert-small", files=("outputs/model.pt",), **fields):
    return client_with_token(user).post(
        MODELS,
        {"job": str(job.public_id), "name": name, "files": list(files), **fields},
        format="json",
    )


def published(user, job, **fields) -> dict:
    response = publish(user, job, **fields)
    assert response.status_code == 201, response.json()
    return response.json()
