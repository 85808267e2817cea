"""`manage.py kit_token`: the execute-node kit's credential, as make run and an admin
joining workstations use it. It reads its own workstations' placement figures and
reservations and nothing a person's token may; making a new one revokes the old, and the
personal-token account kits used before is retired."""

import stat

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.services import token_authenticate, token_create
from forecasts.kit import kit_credential_authenticate
from tests.conftest import script_upload
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def secret_in(path) -> str:
    return path.read_text().strip()


def kit(path) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret_in(path)}")
    return client


def reservations(name: str) -> str:
    return reverse("api:kit-reservations", kwargs={"workstation": name})


def test_it_writes_a_credential_only_its_owner_can_read_that_reads_its_workstations(tmp_path):
    output = tmp_path / "kit.token"
    call_command("kit_token", "--output", str(output), "--workstations", "ws-*,lab-gpu-1")
    assert stat.S_IMODE(output.stat().st_mode) == 0o600
    assert secret_in(output).startswith("nsk_")
    for name in ("ws-volta", "ws-ampere", "lab-gpu-1"):
        assert kit(output).get(reservations(name)).status_code == 200, name
    other = kit(output).get(reservations("lab-gpu-2"))
    assert other.status_code == 403
    assert (
        "This kit's credential is for ws-*, lab-gpu-1, not lab-gpu-2"
        in other.json()["error"]["message"]
    )
    placement = reverse("api:placement-figures", kwargs={"workstation": "lab-gpu-2"})
    assert kit(output).get(placement).status_code == 403


def test_the_credential_is_nobodys_account_and_opens_nothing_else(tmp_path, fake_bridge):
    output = tmp_path / "kit.token"
    call_command("kit_token", "--output", str(output), "--workstations", "ws-*")
    client = kit(output)
    # It cannot mint a token, see jobs, submit one, or read anyone's account.
    minted = client.post(reverse("api:token-list"), {"name": "forever"}, format="json")
    assert minted.status_code == 401
    assert client.get(reverse("api:job-list")).status_code == 401
    submitted = client.post(
        reverse("api:job-list"),
        {"name": "x", "gpus": 1, "script": script_upload()},
        format="multipart",
    )
    assert submitted.status_code == 401
    assert client.get(reverse("api:pool")).status_code == 401
    assert get_user_model().objects.count() == 0


def test_running_it_again_replaces_the_credential_unless_asked_to_keep_a_valid_one(tmp_path):
    output = tmp_path / "kit.token"
    args = ["--output", str(output), "--workstations", "ws-*"]
    call_command("kit_token", *args)
    first = secret_in(output)
    call_command("kit_token", *args, "--keep-valid")
    assert secret_in(output) == first
    call_command("kit_token", "--output", str(output), "--workstations", "ws-volta", "--keep-valid")
    assert secret_in(output) != first  # other workstations: a new one
    assert kit_credential_authenticate(first) is None
    second = secret_in(output)
    call_command("kit_token", "--output", str(output), "--workstations", "ws-volta")
    assert kit_credential_authenticate(second) is None
    refused = APIClient()
    refused.credentials(HTTP_AUTHORIZATION=f"Bearer {second}")
    assert refused.get(reservations("ws-volta")).status_code == 401
    assert kit(output).get(reservations("ws-volta")).status_code == 200


def test_the_account_older_kits_held_a_personal_token_of_is_retired(tmp_path):
    account = UserFactory(username="workstations")
    account.set_unusable_password()
    account.save()
    account.user_permissions.add(Permission.objects.get(codename="view_workstationforecast"))
    old = token_create(user=account, name="execute-node kit").secret
    call_command("kit_token", "--output", str(tmp_path / "kit.token"), "--workstations", "ws-*")
    assert token_authenticate(old) is None
    account.refresh_from_db()
    assert not account.is_active
    assert not account.get_all_permissions()


def test_a_persons_login_of_that_name_is_left_alone(tmp_path):
    person = UserFactory(username="workstations", password="a-long-test-password")
    mine = token_create(user=person, name="laptop").secret
    call_command("kit_token", "--output", str(tmp_path / "kit.token"), "--workstations", "ws-*")
    assert token_authenticate(mine) is not None


@pytest.mark.parametrize("names", ["", " , ", "ws volta", "../x", "$(id)"])
def test_bad_workstation_names_are_a_clear_error(tmp_path, names):
    with pytest.raises(CommandError, match="workstation"):
        call_command("kit_token", "--output", str(tmp_path / "kit.token"), "--workstations", names)


def test_a_file_it_cannot_write_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="Cannot write .*: No such file or directory"):
        call_command(
            "kit_token",
            "--output",
            str(tmp_path / "missing" / "kit.token"),
            "--workstations",
            "ws-*",
        )
