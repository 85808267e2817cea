"""An owner claims their workstation with the one-time code its kit printed: the kit's command
asks the real portal for it with the kit's credential; whoever signs in and enters it owns
the workstation; a mistyped, used, expired or replaced code is refused and changes nothing."""

import re
import subprocess
import sys
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEntry
from forecasts.kit import kit_credential_create
from lending.models import ClaimCode, WorkstationOwner
from lending.services import claim_code_create
from tests.conftest import client_with_token
from tests.factories import UserFactory
from tests.forecasts.test_placement_figures import SCRIPT

CLAIM_CODE = SCRIPT.with_name("claim-code")


def claim(client, code: str):
    return client.post(reverse("lending:claim"), {"code": code})


@pytest.mark.django_db(transaction=True)
def test_the_kits_command_prints_a_code_that_makes_whoever_enters_it_an_owner(
    live_server, client, tmp_path
):
    token = tmp_path / "kit.token"
    token.write_text(kit_credential_create(label="kit", workstations=["ws-*"])[1] + "\n")
    done = subprocess.run(
        [sys.executable, str(CLAIM_CODE), "--portal", live_server.url]
        + ["--token-file", str(token), "--name", "ws-volta"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert f"{live_server.url}/workstations/claim/" in done.stdout
    code = re.search(r"NS-[2-9A-Z]{4}-[2-9A-Z]{4}", done.stdout).group(0)
    assert code not in str(list(ClaimCode.objects.values()))  # only its digest is kept

    prof = UserFactory(username="prof")
    client.force_login(prof)
    answer = claim(client, f"  {code.lower()} ")  # as it may be typed
    assert answer.status_code == 302
    assert answer["Location"] == reverse("lending:workstation", args=["ws-volta"])
    assert WorkstationOwner.objects.filter(workstation="ws-volta", user=prof).exists()
    assert AuditEntry.objects.filter(action="lending.claim").exists()
    # Used once, it is worth nothing to the next person.
    client.force_login(UserFactory(username="someone"))
    assert claim(client, code).status_code == 400
    assert WorkstationOwner.objects.count() == 1


@pytest.mark.django_db
def test_a_wrong_expired_or_replaced_code_is_refused_with_what_to_do(client):
    client.force_login(UserFactory(username="prof"))
    answer = claim(client, "NS-2222-2222")
    assert answer.status_code == 400
    assert "Run nightshift-claim-code on the workstation for a new one." in answer.content.decode()
    old, _ = claim_code_create(workstation="ws-volta")
    new, _ = claim_code_create(workstation="ws-volta")
    assert claim(client, old).status_code == 400  # replaced by the newer one
    expired, made = claim_code_create(workstation="ws-fermi")
    ClaimCode.objects.filter(pk=made.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert claim(client, expired).status_code == 400
    assert not WorkstationOwner.objects.exists()
    assert claim(client, new).status_code == 302


@pytest.mark.django_db
def test_only_a_workstations_own_kit_and_admins_ask_for_its_codes(student, client):
    url = reverse("api:kit-claim-code", kwargs={"workstation": "ws-volta"})
    assert client_with_token(student).post(url).status_code == 403
    assert client.post(url).status_code == 401
    other = kit_credential_create(label="other", workstations=["ws-ampere"])[1]
    assert client.post(url, HTTP_AUTHORIZATION=f"Bearer {other}").status_code == 403
    assert not ClaimCode.objects.exists()
