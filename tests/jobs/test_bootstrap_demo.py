import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from labs.models import Lab

pytestmark = pytest.mark.django_db


def test_the_demo_gets_a_student_a_lead_and_an_admin_and_a_lab_once(capsys):
    call_command("bootstrap_demo")
    first = capsys.readouterr().out
    call_command("bootstrap_demo")
    second = capsys.readouterr().out
    assert all(f"login: {name}" in first for name in ("student", "lead", "admin"))
    assert "Demo lab" in first
    assert "login:" not in second and "Demo lab" not in second
    lab = Lab.objects.get()
    assert lab.memberships.get(role="lead").user.username == "lead"
    lead = get_user_model().objects.get(username="lead")
    assert lead.has_perm("labs.lead_lab") and not lead.is_staff
    assert lab.memberships.get(role="member").user.username == "student"
    assert lab.accounting_group == "group_demo_lab"
