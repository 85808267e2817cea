"""The execute-node kit's cron job publishes how a workstation's owners lend it, read from the
real portal at every run and judged against the workstation's own clock: their days and
hours, a pause, their labs, how much of it, "only while I am away", and "I need it back",
whether asked in the portal or on the workstation itself."""

import json
import subprocess
import sys
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from forecasts.kit import kit_credential_create
from lending.models import LendingTerms
from lending.services import reclaim_end, reclaim_request
from tests.conftest import client_with_token
from tests.factories import LabFactory, UserFactory
from tests.forecasts.test_placement_figures import SCRIPT
from tests.forecasts.test_placement_figures import run_kit as run_cron

RECLAIM = SCRIPT.with_name("reclaim")
TERMS = [
    "NightshiftLendOpen",
    "NightshiftLendLabs",
    "NightshiftLendGpus",
    "NightshiftLendMemory",
    "NightshiftAwayAfter",
    "NightshiftReclaimBy",
]


@pytest.fixture
def kit_token(db):
    return kit_credential_create(label="kit", workstations=["ws-volta"])[1]


def run_kit(tmp_path, portal: str, token: str) -> tuple[dict[str, str], str]:
    """The terms the kit's cron job published, and its stderr."""
    printed, errors = run_cron(
        tmp_path,
        portal,
        token,
        "--terms-cache",
        str(tmp_path / "terms.json"),
        "--reclaim-file",
        str(tmp_path / "reclaim.json"),
        "--notice-file",
        str(tmp_path / "notice.json"),
    )
    return {name: printed[name] for name in TERMS}, errors


def terms(**fields) -> LendingTerms:
    made = LendingTerms.objects.create(workstation="ws-volta", **fields)
    return made


@pytest.mark.django_db(transaction=True)
def test_a_workstation_without_terms_publishes_nothing_that_restricts_it(
    live_server, kit_token, tmp_path
):
    published, errors = run_kit(tmp_path, live_server.url, kit_token)
    assert published == dict.fromkeys(TERMS, "undefined"), errors


@pytest.mark.django_db(transaction=True)
def test_the_owners_labs_and_limits_are_published_as_the_kits_start_expression_reads_them(
    live_server, kit_token, tmp_path
):
    vision = LabFactory(name="Vision", accounting_group="group_vision")
    nlp = LabFactory(name="NLP", accounting_group="group_nlp")
    made = terms(max_gpus=1, max_memory_gb=16, only_while_away=True, away_after_minutes=20)
    made.labs.set([vision, nlp])
    published, errors = run_kit(tmp_path, live_server.url, kit_token)
    assert published == {
        "NightshiftLendOpen": "True",
        "NightshiftLendLabs": '"group_nlp,group_vision"',
        "NightshiftLendGpus": "1",
        "NightshiftLendMemory": str(16 * 1024),
        "NightshiftAwayAfter": str(20 * 60),
        "NightshiftReclaimBy": "undefined",
    }, errors


@pytest.mark.django_db(transaction=True)
def test_outside_the_owners_days_or_hours_or_while_paused_it_is_not_open(
    live_server, kit_token, tmp_path
):
    local = timezone.localtime()
    today = local.weekday()
    made = terms(days=[(today + 1) % 7])
    assert run_kit(tmp_path, live_server.url, kit_token)[0]["NightshiftLendOpen"] == "False"
    made.days = [today]
    minute = local.hour * 60 + local.minute
    # An hour that is over (or, just after midnight, one still to come).
    made.from_minute, made.until_minute = (minute + 2, 1440) if minute < 60 else (0, minute - 1)
    made.save()
    assert run_kit(tmp_path, live_server.url, kit_token)[0]["NightshiftLendOpen"] == "False"
    made.from_minute, made.until_minute = 0, 1440
    made.paused_until = timezone.now() + timedelta(days=1)
    made.save()
    assert run_kit(tmp_path, live_server.url, kit_token)[0]["NightshiftLendOpen"] == "False"
    made.paused_until = timezone.now() - timedelta(minutes=1)
    made.save()
    assert run_kit(tmp_path, live_server.url, kit_token)[0]["NightshiftLendOpen"] == "True"


@pytest.mark.django_db(transaction=True)
def test_asked_back_in_the_portal_it_closes_and_publishes_the_deadline(
    live_server, kit_token, tmp_path
):
    owner = UserFactory(username="prof", is_staff=True)
    asked = reclaim_request(user=owner, workstation="ws-volta", minutes=5)
    published, _ = run_kit(tmp_path, live_server.url, kit_token)
    assert published["NightshiftReclaimBy"] == str(int(asked.deadline.timestamp()))
    assert published["NightshiftLendOpen"] == "False"
    # The portal is gone: the request read last still stands.
    published, errors = run_kit(tmp_path, "http://127.0.0.1:9", kit_token)
    assert "terms: could not fetch them" in errors
    assert published["NightshiftReclaimBy"] == str(int(asked.deadline.timestamp()))


@pytest.mark.django_db(transaction=True)
def test_asked_back_on_the_workstation_itself_without_the_portal(live_server, kit_token, tmp_path):
    subprocess.run(
        [sys.executable, str(RECLAIM), "3", "--file", str(tmp_path / "reclaim.json")]
        + ["--no-reconfig"],
        check=True,
        capture_output=True,
        timeout=30,
    )
    deadline = json.loads((tmp_path / "reclaim.json").read_text())["deadline"]
    assert abs(deadline - (timezone.now().timestamp() + 180)) < 30
    published, _ = run_kit(tmp_path, live_server.url, kit_token)
    assert published["NightshiftReclaimBy"] == str(deadline)
    subprocess.run(
        [sys.executable, str(RECLAIM), "--lend-again", "--file", str(tmp_path / "reclaim.json")]
        + ["--no-reconfig"],
        check=True,
        capture_output=True,
        timeout=30,
    )
    assert run_kit(tmp_path, live_server.url, kit_token)[0]["NightshiftReclaimBy"] == "undefined"


@pytest.mark.django_db(transaction=True)
def test_while_asked_back_the_running_jobs_are_told_in_a_file_every_account_reads(
    live_server, kit_token, tmp_path
):
    notice = tmp_path / "notice.json"
    run_kit(tmp_path, live_server.url, kit_token)
    assert not notice.exists()
    owner = UserFactory(is_staff=True)
    asked = reclaim_request(user=owner, workstation="ws-volta", minutes=5)
    run_kit(tmp_path, live_server.url, kit_token)
    told = json.loads(notice.read_text())
    assert told["reclaim_by"] == int(asked.deadline.timestamp())
    assert abs(told["noticed_at"] - timezone.now().timestamp()) < 30
    assert notice.stat().st_mode & 0o777 == 0o644
    # The next run keeps the moment it was noticed: the jobs save once for one request.
    run_kit(tmp_path, live_server.url, kit_token)
    assert json.loads(notice.read_text()) == told
    reclaim_end(user=owner, workstation="ws-volta")
    run_kit(tmp_path, live_server.url, kit_token)
    assert not notice.exists()


@pytest.mark.django_db
def test_only_its_kit_and_admins_read_a_workstations_terms(student, client, kit_token):
    url = reverse("api:kit-terms", kwargs={"workstation": "ws-volta"})
    assert client_with_token(student).get(url).status_code == 403
    assert client.get(url).status_code == 401
    other = kit_credential_create(label="other", workstations=["ws-ampere"])[1]
    answer = client.get(url, HTTP_AUTHORIZATION=f"Bearer {other}")
    assert answer.status_code == 403
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {kit_token}").status_code == 200
