"""`manage.py kit_token`: the execute-node kit's account and its token, as make run and an
admin joining workstations use them. The token reads a workstation's reservations and
nothing a person's account may; running the command again replaces the token, or keeps it
with --keep-valid."""

import stat

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.services import token_authenticate
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def secret_in(path) -> str:
    return path.read_text().strip()


def test_it_writes_a_token_only_its_owner_can_read_that_reads_reservations(tmp_path):
    output = tmp_path / "kit.token"
    call_command("kit_token", "--output", str(output))
    assert stat.S_IMODE(output.stat().st_mode) == 0o600
    account = get_user_model().objects.get(username="workstations")
    assert not account.has_usable_password()
    assert not (account.is_staff or account.is_superuser)
    assert account.get_all_permissions() == {"forecasts.view_workstationforecast"}
    kit = APIClient()
    kit.credentials(HTTP_AUTHORIZATION=f"Bearer {secret_in(output)}")
    url = reverse("api:kit-reservations", kwargs={"workstation": "ws-volta"})
    assert kit.get(url).status_code == 200


def test_running_it_again_replaces_the_token_unless_asked_to_keep_a_valid_one(tmp_path):
    output = tmp_path / "kit.token"
    call_command("kit_token", "--output", str(output))
    first = secret_in(output)
    call_command("kit_token", "--output", str(output), "--keep-valid")
    assert secret_in(output) == first
    call_command("kit_token", "--output", str(output))
    assert secret_in(output) != first
    assert token_authenticate(first) is None
    assert token_authenticate(secret_in(output)) is not None


def test_it_refuses_to_turn_a_persons_login_into_the_kits_account(tmp_path):
    UserFactory(username="workstations", password="a-long-test-password")
    with pytest.raises(CommandError, match="'workstations' is somebody's login"):
        call_command("kit_token", "--output", str(tmp_path / "kit.token"))


def test_a_file_it_cannot_write_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="Cannot write .*: No such file or directory"):
        call_command("kit_token", "--output", str(tmp_path / "missing" / "kit.token"))
