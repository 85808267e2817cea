"""Production settings, from the environment alone: `manage.py check --deploy` is clean with
deploy/production/nightshift.env.example, and each unsafe choice is named."""

import os
import subprocess
import sys
from pathlib import Path
from secrets import token_urlsafe

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "production" / "nightshift.env.example"


def production_env(tmp_path: Path, **changes: str | None) -> dict[str, str]:
    """The example's settings, with its secret files made real under tmp_path."""
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}
    for line in EXAMPLE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, value = line.split("=", 1)
            env[name] = value
    secrets = {"DATABASE_URL_FILE": "postgres://nightshift:pw-9f3a@127.0.0.1:5432/nightshift"}
    for name in [name for name in env if name.endswith("_FILE")]:
        secret = secrets.get(name, token_urlsafe(50))
        path = tmp_path / name.lower()
        path.write_text(secret + "\n")
        path.chmod(0o600)
        env[name] = str(path)
    env["NIGHTSHIFT_VAR_DIR"] = str(tmp_path / "var")
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_production_example_passes_check_deploy(tmp_path):
    done = check_deploy(production_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout


def test_the_development_secret_key_is_refused(tmp_path):
    done = check_deploy(production_env(tmp_path, SECRET_KEY_FILE=None))
    assert done.returncode == 1
    assert "nightshift.E001" in done.stderr


def test_plain_http_is_named(tmp_path):
    done = check_deploy(production_env(tmp_path, NIGHTSHIFT_HTTPS="false"))
    assert done.returncode == 1
    for warning in ("nightshift.W001", "security.W012", "security.W016", "security.W004"):
        assert warning in done.stderr


def test_debug_on_is_named(tmp_path):
    done = check_deploy(production_env(tmp_path, DEBUG="true"))
    assert (done.returncode, "security.W018" in done.stderr) == (1, True)


def test_a_secret_file_that_cannot_be_read_stops_the_portal_without_showing_secrets(tmp_path):
    done = check_deploy(production_env(tmp_path, SECRET_KEY_FILE=str(tmp_path / "missing")))
    assert done.returncode == 1
    assert "SECRET_KEY_FILE names" in done.stderr and "cannot be read" in done.stderr


def test_a_bad_database_url_is_reported_without_its_password(tmp_path):
    bad = tmp_path / "bad-url"
    bad.write_text("postgress://nightshift:pw-9f3a@db/nightshift")
    done = check_deploy(production_env(tmp_path, DATABASE_URL_FILE=str(bad)))
    assert done.returncode == 1
    assert "DATABASE_URL" in done.stderr
    assert "pw-9f3a" not in done.stderr and "nightshift:***@db" in done.stderr


@pytest.mark.parametrize("name", ["SECRET_KEY", "DATABASE_URL", "EMAIL_HOST_PASSWORD"])
def test_a_secret_set_twice_is_refused(tmp_path, name):
    done = check_deploy(production_env(tmp_path, **{name: "also-here"}))
    assert done.returncode == 1
    assert f"Set {name} or {name}_FILE, not both" in done.stderr


def test_a_secret_file_others_can_read_is_named(tmp_path):
    env = production_env(tmp_path)
    Path(env["SECRET_KEY_FILE"]).chmod(0o644)
    done = check_deploy(env)
    assert done.returncode == 1
    assert "nightshift.W002" in done.stderr and "secret_key_file" in done.stderr
    assert "mode 644" in done.stderr


def test_the_settings_file_systemd_reads_must_be_private_too(tmp_path):
    settings_file = tmp_path / "nightshift.env"
    settings_file.write_text(EXAMPLE.read_text())
    settings_file.chmod(0o640)
    done = check_deploy(production_env(tmp_path, NIGHTSHIFT_SETTINGS_FILE=str(settings_file)))
    assert (done.returncode, "nightshift.W002" in done.stderr) == (1, True)
    settings_file.chmod(0o600)
    done = check_deploy(production_env(tmp_path, NIGHTSHIFT_SETTINGS_FILE=str(settings_file)))
    assert done.returncode == 0, done.stderr
