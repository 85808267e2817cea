"""Roles are Django groups with permissions: a lab lead is in "Lab leads" (labs.lead_lab)."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from labs.models import Membership
from tests.factories import LabFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_the_groups_exist_with_their_permissions():
    leads = Group.objects.get(name="Lab leads")
    assert list(leads.permissions.values_list("codename", flat=True)) == ["lead_lab"]
    admins = Group.objects.get(name="Nightshift administrators")
    codenames = set(admins.permissions.values_list("codename", flat=True))
    assert {"change_lab", "change_membership", "view_job", "view_auditentry"} <= codenames
    assert "change_auditentry" not in codenames


def test_making_someone_lead_in_the_admin_puts_them_in_the_leads_group(admin_client):
    client = admin_client
    lab, ada = LabFactory(name="Vision"), UserFactory(username="ada")
    client.post(
        reverse("admin:labs_membership_add"), {"lab": lab.pk, "user": ada.pk, "role": "lead"}
    )
    assert ada.groups.filter(name="Lab leads").exists()
    membership = Membership.objects.get()
    client.post(reverse("admin:labs_membership_delete", args=[membership.pk]), {"post": "yes"})
    assert not ada.groups.filter(name="Lab leads").exists()


def test_a_lead_role_without_the_permission_grants_nothing(client):
    lab = LabFactory(name="Vision")
    lead = UserFactory(username="lead")
    Membership.objects.create(lab=lab, user=lead, role="lead")  # not through a service
    client.force_login(lead)
    assert client.get(reverse("labs:detail", args=[lab.pk])).status_code == 404
