"""The placement figures a workstation publishes: the portal's API hands out a week of them,
and the execute-node kit's cron job (deploy/execute-node/placement-figures), run as the startd
runs it against the real portal, prints the row for now, keeps a week through an outage and
prints nothing usable once they are too old or refused."""

import json
import logging
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from forecasts.kit import kit_credential_create
from forecasts.model.availability import QUARTERS_PER_WEEK, quarter_of_week
from forecasts.models import WorkstationForecast
from tests.conftest import client_with_token
from tests.factories import UserFactory

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "execute-node" / "placement-figures"
ATTRIBUTES = [f"NightshiftStayFree{h}h" for h in (2, 4, 8, 16, 24)] + [
    "NightshiftMeanFreeS",
    "NightshiftPossibleReturnAt",
]


def week_of_figures() -> list[list[float]]:
    """A different row for each quarter hour, so that the row printed says which was read."""
    return [[round(q / 1000, 3)] * 5 for q in range(QUARTERS_PER_WEEK)]


@pytest.fixture
def forecast(db):
    return WorkstationForecast.objects.create(
        workstation="ws-volta",
        fitted_at=timezone.now(),
        observed_days=21,
        stay_free=week_of_figures(),
        confidence=["high"] * QUARTERS_PER_WEEK,
        description="Usually free 17:00-09:00 on weekdays.",
    )


@pytest.fixture
def kit_secret(db):
    """The credential the kit holds (manage.py kit_token): its workstations' figures, no more."""
    return kit_credential_create(label="kit", workstations=["ws-*"])[1]


def kit_client(secret) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def figures_url(name="ws-volta"):
    return reverse("api:placement-figures", kwargs={"workstation": name})


@pytest.mark.django_db
def test_the_kits_credential_reads_a_week_of_figures(forecast, kit_secret):
    answer = kit_client(kit_secret).get(figures_url())
    assert answer.status_code == 200
    body = answer.json()
    assert body["hours"] == [2, 4, 8, 16, 24]
    assert len(body["quarter_hours"]) == QUARTERS_PER_WEEK
    assert body["time_zone"] == "UTC"
    assert datetime.fromisoformat(body["valid_until"]) > timezone.now() + timedelta(days=7)


@pytest.mark.django_db
def test_students_and_strangers_cannot_read_them(forecast, student, client):
    assert client_with_token(student).get(figures_url()).status_code == 403
    assert client.get(figures_url()).status_code == 401
    # Nor can a user allowed to view forecasts who is not an admin.
    student.user_permissions.add(Permission.objects.get(codename="view_workstationforecast"))
    assert client_with_token(student).get(figures_url()).status_code == 403


@pytest.mark.django_db
def test_a_workstation_without_a_forecast_or_with_a_bad_name_is_refused_clearly(
    forecast, kit_secret
):
    api = kit_client(kit_secret)
    missing = api.get(figures_url("ws-unknown"))
    assert missing.status_code == 404
    assert "No forecast for ws-unknown yet" in missing.json()["error"]["message"]
    # A name outside the kit's own is refused before it is read; an admin is told why.
    assert api.get(figures_url("bad name;rm")).status_code == 403
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    assert client_with_token(admin).get(figures_url("bad name;rm")).status_code == 400


@pytest.mark.django_db
def test_a_kit_asking_before_the_first_forecast_leaves_the_console_quiet(kit_secret, caplog):
    # Every workstation's kit asks from the start, every 30 s: "not yet" is normal work.
    console = next(h for h in logging.getLogger().handlers if h.get_name() == "console")

    def shown() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.name == "django.request" and console.filter(r)
        ]

    assert kit_client(kit_secret).get(figures_url("ws-volta")).status_code == 404
    assert any("placement" in r.getMessage() for r in caplog.records)  # logged, then left out
    assert shown() == []
    # Other 404s still show as before.
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    assert client_with_token(admin).get("/api/v1/jobs/0000/").status_code == 404
    assert shown() == ["Not Found: /api/v1/jobs/0000/"]


def run_kit(tmp_path, portal: str, token: str, *options: str, refresh_hours: float = 6.0):
    """The kit's cron job as the startd runs it, for ws-volta: what it printed, as
    {attribute: value} (in order), and its stderr. `options` are more of its arguments."""
    token_file = tmp_path / "kit.token"
    token_file.write_text(token + "\n")
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--portal",
            portal,
            "--token-file",
            str(token_file),
            "--name",
            "ws-volta",
            "--cache",
            str(tmp_path / "cache.json"),
            "--refresh-hours",
            str(refresh_hours),
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(line.split(" = ", 1) for line in result.stdout.splitlines()), result.stderr


def quarters_around_now() -> set[str]:
    now = datetime.now(UTC)
    return {
        f"{quarter_of_week(moment, ZoneInfo('UTC')) / 1000:.3f}"
        for moment in (now - timedelta(minutes=1), now, now + timedelta(minutes=1))
    }


@pytest.mark.django_db(transaction=True)
def test_the_cron_job_prints_the_figures_for_now_from_the_real_portal(
    live_server, forecast, kit_secret, tmp_path
):
    token = kit_secret
    printed, errors = run_kit(tmp_path, live_server.url, token)
    assert list(printed) == ATTRIBUTES
    assert printed["NightshiftStayFree8h"] in quarters_around_now(), errors
    assert json.loads((tmp_path / "cache.json").read_text())["workstation"] == "ws-volta"
    assert int(printed["NightshiftMeanFreeS"]) > 0


@pytest.mark.django_db(transaction=True)
def test_the_cron_job_publishes_when_the_owner_may_be_back(
    live_server, forecast, kit_secret, tmp_path
):
    # An office: free now, surely for two hours, but likely back within four.
    forecast.stay_free = [[1.0, 0.2, 0.1, 0.05, 0.02]] * QUARTERS_PER_WEEK
    forecast.save(update_fields=["stay_free"])
    printed, errors = run_kit(tmp_path, live_server.url, kit_secret)
    back_in = int(printed["NightshiftPossibleReturnAt"]) - datetime.now(UTC).timestamp()
    assert 2 * 3600 < back_in < 2.5 * 3600, errors
    assert 2 * 3600 < int(printed["NightshiftMeanFreeS"]) < 5 * 3600


@pytest.mark.django_db(transaction=True)
def test_through_a_portal_outage_the_cron_job_keeps_the_week_it_has(
    live_server, forecast, kit_secret, tmp_path
):
    token = kit_secret
    run_kit(tmp_path, live_server.url, token)
    # The portal is gone (nothing listens there) and the cache is due a refresh.
    printed, errors = run_kit(tmp_path, "http://127.0.0.1:9", token, refresh_hours=0)
    assert "could not fetch them" in errors
    assert printed["NightshiftStayFree2h"] in quarters_around_now()


def test_figures_past_their_validity_print_as_undefined(tmp_path):
    stale = {
        "workstation": "ws-volta",
        "valid_until": "2026-01-01T00:00:00Z",
        "time_zone": "UTC",
        "hours": [2, 4, 8, 16, 24],
        "quarter_hours": week_of_figures(),
    }
    (tmp_path / "cache.json").write_text(json.dumps(stale))
    printed, _ = run_kit(tmp_path, "http://127.0.0.1:9", "unused", refresh_hours=1000)
    assert set(printed.values()) == {"undefined"}


@pytest.mark.django_db(transaction=True)
def test_a_token_that_may_not_read_them_publishes_nothing(live_server, forecast, tmp_path):
    # Another workstation's kit credential.
    token = kit_credential_create(label="other", workstations=["lab-gpu-1"])[1]
    printed, errors = run_kit(tmp_path, live_server.url, token)
    assert set(printed.values()) == {"undefined"}
    assert "the portal answered 403" in errors
