"""A lab lead's page: the members, their use of the quota, adding and removing them."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEntry
from labs.models import Membership
from tests.factories import LabFactory, MembershipFactory, UserFactory, job_that_ran

pytestmark = pytest.mark.django_db


@pytest.fixture
def vision():
    return LabFactory(name="Vision", gpu_hours=100)


@pytest.fixture
def lead(client, vision):
    user = MembershipFactory(lab=vision, user=UserFactory(username="lead"), role="lead").user
    client.force_login(user)
    return user


def test_the_lead_sees_each_members_gpu_hours(client, lead, vision):
    ada = MembershipFactory(lab=vision, user=UserFactory(username="ada")).user
    job_that_ran(
        ada, lab=vision, gpus=2, start=timezone.now() - timedelta(hours=3), end=timezone.now()
    )
    body = client.get(reverse("labs:detail", args=[vision.pk])).content.decode()
    assert "ada" in body and "6.0" in body
    account = client.get(reverse("accounts:account")).content.decode()
    assert reverse("labs:detail", args=[vision.pk]) in account


def test_the_lead_adds_by_username_or_email_and_removes(client, lead, vision):
    UserFactory(username="bob", email="bob@example.org")
    client.post(reverse("labs:detail", args=[vision.pk]), {"who": "BOB@example.org"})
    membership = Membership.objects.get(user__username="bob")
    assert membership.role == "member"
    client.post(reverse("labs:member_remove", args=[vision.pk, membership.pk]))
    assert not Membership.objects.filter(user__username="bob").exists()
    actions = list(AuditEntry.objects.filter(actor=lead).values_list("action", flat=True))
    assert "membership.add" in actions and "membership.remove" in actions


def test_an_unknown_name_is_explained(client, lead, vision):
    response = client.post(reverse("labs:detail", args=[vision.pk]), {"who": "nobody"}, follow=True)
    assert "Nobody is called &#x27;nobody&#x27;" in response.content.decode()


def test_a_member_or_another_labs_lead_gets_a_404(client, vision):
    for user in (
        MembershipFactory(lab=vision).user,
        MembershipFactory(lab=LabFactory(name="NLP"), role="lead").user,
    ):
        client.force_login(user)
        assert client.get(reverse("labs:detail", args=[vision.pk])).status_code == 404
        target = Membership.objects.filter(lab=vision).first()
        url = reverse("labs:member_remove", args=[vision.pk, target.pk])
        assert client.post(url).status_code == 404


def test_the_lab_page_links_to_the_labs_usage_report(client, lead, vision):
    body = client.get(reverse("labs:detail", args=[vision.pk])).content.decode()
    assert f'/reports/?lab={vision.pk}"' in body
