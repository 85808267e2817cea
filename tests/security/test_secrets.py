"""Secrets stay secret: none in the repository, none in logs, error pages or error reports."""

import re
import subprocess
from pathlib import Path

import pytest
from django.test import RequestFactory
from django.urls import reverse
from django.views.debug import ExceptionReporter

from tests.conftest import client_with_token

ROOT = Path(__file__).resolve().parents[2]

LOOKS_LIKE_A_SECRET = {
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    # HTCondor IDTOKENs and other JWTs: header.payload.signature, each base64url.
    "JWT (an IDTOKEN?)": re.compile(r"eyJ[\w-]{10,}\.eyJ[\w-]{10,}\.[\w-]{20,}"),
    "Nightshift API token": re.compile(r"nst_[\w-]{40,}"),
    "execute-node kit credential": re.compile(r"nsk_[\w-]{40,}"),
    # Placeholders, the tests' made-up ones and the local test database's public default
    # (trust authentication, no password checked) are not secrets.
    "password in a URL": re.compile(
        r"\b(?:postgres|postgresql|redis|rediss|amqp|ldaps?)://[^:/@\s]*:"
        r"(?!\*\*\*@|PASSWORD@|pw-9f3a@|postgres@127\.0\.0\.1[:/])[^@\s/]{4,}@"
    ),
}


def test_no_secret_is_committed():
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    found = []
    for name in filter(None, tracked):
        path = ROOT / name
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        text = path.read_bytes().decode("utf-8", errors="ignore")
        found += [
            f"{name}: {what}"
            for what, pattern in LOOKS_LIKE_A_SECRET.items()
            if pattern.search(text)
        ]
    assert found == []


def test_the_scan_would_see_each_kind_of_secret():
    # Put together here, so that this file does not hold what it looks for.
    dash = "-" * 5
    samples = [
        f"{dash}BEGIN OPENSSH PRIVATE {'KEY'}{dash}",
        "eyJ" + "hbGciOiJIUzI1NiJ9" + ".eyJ" + "pYXQiOjE3MzAwMDAwMDB9." + "c2ln" * 8,
        "nst_" + "x" * 43,
        "nsk_" + "x" * 43,
        "redis://:" + "hunter22" + "@cache:6379/0",
    ]
    for sample in samples:
        assert any(pattern.search(sample) for pattern in LOOKS_LIKE_A_SECRET.values()), sample


def test_dot_gitignore_keeps_tokens_and_local_state_out():
    ignored = subprocess.run(
        ["git", "check-ignore", "var/condor-tokens/portal.token", "var/postgres/data/PG_VERSION"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert ignored.stdout.split() == [
        "var/condor-tokens/portal.token",
        "var/postgres/data/PG_VERSION",
    ]


SECRETS = {
    "SECRET_KEY": "sk-" + "Zq8" * 20,
    "REDIS_PASSWORD": "redis-pw-71ab",
    "DB_PASSWORD": "db-pw-55cd",
}


@pytest.fixture
def secret_settings(settings):
    settings.DEBUG = False
    settings.SECRET_KEY = SECRETS["SECRET_KEY"]
    settings.REDIS_URL = "redis://:" + SECRETS["REDIS_PASSWORD"] + "@127.0.0.1:6379/0"
    settings.CELERY_BROKER_URL = settings.REDIS_URL
    settings.NIGHTSHIFT_LDAP_BIND_PASSWORD = "ldap-pw-90ef"
    return settings


def broken(*args, **kwargs):
    raise RuntimeError("disk on fire")


@pytest.mark.django_db
def test_a_crash_shows_and_logs_no_secret(secret_settings, student, monkeypatch, caplog, client):
    from jobs import views as web_views
    from jobs.api import views as api_views

    monkeypatch.setattr(api_views.selectors, "job_list_visible_to", broken)
    monkeypatch.setattr(web_views.selectors, "job_list_visible_to", broken, raising=False)
    api = client_with_token(student)
    bearer = api._credentials["HTTP_AUTHORIZATION"].split()[1]
    api_answer = api.get(reverse("api:job-list"))
    client.raise_request_exception = False
    client.force_login(student)
    web_answer = client.get(reverse("jobs:list"))
    assert (api_answer.status_code, web_answer.status_code) == (500, 500)
    assert "disk on fire" in caplog.text  # the crash is logged, for the operator
    shown = api_answer.content.decode() + web_answer.content.decode() + caplog.text
    for secret in [*SECRETS.values(), bearer, "ldap-pw-90ef"]:
        assert secret not in shown


@pytest.mark.django_db
def test_the_error_report_for_admins_hides_secrets(secret_settings, student, monkeypatch, caplog):
    """What Django mails to ADMINS (and shows with DEBUG on) for a logged crash: here one
    inside token authentication, where the token itself is in the code's hands."""
    from accounts import services

    api = client_with_token(student)
    authorization = api._credentials["HTTP_AUTHORIZATION"]
    monkeypatch.setattr(services.AccessToken.objects, "select_related", broken)
    assert api.get(reverse("api:job-list")).status_code == 500
    (crash,) = [record for record in caplog.records if record.exc_info]
    request = RequestFactory().get(
        "/api/v1/jobs/", HTTP_AUTHORIZATION=authorization, HTTP_COOKIE="sessionid=abcdef123456"
    )
    report = ExceptionReporter(request, *crash.exc_info)
    text = report.get_traceback_text() + report.get_traceback_html()
    assert "disk on fire" in text and "token_authenticate" in text
    for secret in [
        SECRETS["SECRET_KEY"],
        SECRETS["REDIS_PASSWORD"],
        authorization.split()[1],
        "abcdef123456",
    ]:
        assert secret not in text
