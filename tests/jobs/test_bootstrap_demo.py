import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from labs.models import Lab

pytestmark = pytest.mark.django_db


def test_the_demo_gets_accounts_and_a_lab_once(capsys):
    call_command("bootstrap_demo")
    first = capsys.readouterr().out
    call_command("bootstrap_demo")
    second = capsys.readouterr().out
    assert "login: student" in first and "Demo lab" in first
    assert "login:" not in second and "Demo lab" not in second
    lab = Lab.objects.get()
    assert lab.memberships.get(role="lead").user.username == "admin"
    assert get_user_model().objects.get(username="admin").has_perm("labs.lead_lab")
    assert lab.accounting_group == "group_demo_lab"
