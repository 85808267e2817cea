"""Settings come from the environment; a bad value names its variable."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.env import (
    development_database_url,
    env_bool,
    env_choice,
    env_database,
    env_int,
    env_names,
    env_path,
    env_url,
    env_url_prefix,
)


def test_a_bad_integer_names_the_variable(monkeypatch):
    monkeypatch.setenv("NIGHTSHIFT_SYNC_X", "three")
    with pytest.raises(ImproperlyConfigured, match="NIGHTSHIFT_SYNC_X must be a whole number"):
        env_int("NIGHTSHIFT_SYNC_X", 3)


def test_an_integer_below_its_minimum_is_refused(monkeypatch):
    monkeypatch.setenv("X_UID", "0")
    with pytest.raises(ImproperlyConfigured, match="X_UID must be at least 1"):
        env_int("X_UID", None, minimum=1)


SCHEDD = re.compile(r"[a-z0-9@.]+")


def test_a_list_of_names_is_read_apart_at_commas(monkeypatch):
    monkeypatch.setenv("SCHEDDS_X", " ap1 , ap2@host ,")
    assert env_names("SCHEDDS_X", SCHEDD) == ["ap1", "ap2@host"]


@pytest.mark.parametrize(
    ("value", "allowed", "error"),
    [
        ("ap1,ap1", None, "SCHEDDS_X names the same schedd twice"),
        ("ap1,ap 2", None, "SCHEDDS_X: 'ap 2' is not a schedd"),
        ('ap1,"]; rm -rf /', None, "is not a schedd"),
        ("ap3", ["ap1", "ap2"], "SCHEDDS_X names 'ap3', which is not among"),
    ],
)
def test_a_bad_list_of_names_says_which_name_is_wrong(monkeypatch, value, allowed, error):
    monkeypatch.setenv("SCHEDDS_X", value)
    with pytest.raises(ImproperlyConfigured, match=re.escape(error)):
        env_names("SCHEDDS_X", SCHEDD, allowed=allowed, what="schedd")


def test_a_bad_boolean_names_the_variable(monkeypatch):
    monkeypatch.setenv("DEBUG_X", "maybe")
    with pytest.raises(ImproperlyConfigured, match="DEBUG_X must be true or false"):
        env_bool("DEBUG_X", False)


def test_a_choice_outside_its_options_is_refused(monkeypatch):
    monkeypatch.setenv("CONDOR_FILE_MODE_X", "ftp")
    with pytest.raises(
        ImproperlyConfigured, match="CONDOR_FILE_MODE_X must be one of shared, spool"
    ):
        env_choice("CONDOR_FILE_MODE_X", "shared", ("shared", "spool"))


def test_a_database_url_with_an_unknown_scheme_is_refused(monkeypatch):
    monkeypatch.setenv("DATABASE_URL_X", "nosuchdb://x")
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL_X"):
        env_database("DATABASE_URL_X", "postgres://u@h/x")


@pytest.mark.parametrize("url", ["sqlite:////tmp/x.db", "mysql://u:secret@h/x"])
def test_a_database_other_than_postgresql_is_refused_with_the_reason(monkeypatch, url):
    monkeypatch.setenv("DATABASE_URL_X", url)
    with pytest.raises(ImproperlyConfigured, match="must name a PostgreSQL database") as refused:
        env_database("DATABASE_URL_X", "postgres://u@h/x")
    assert "PostgreSQL only" in str(refused.value)
    assert "secret" not in str(refused.value)


def test_the_default_database_is_used_when_unset(monkeypatch):
    monkeypatch.delenv("DATABASE_URL_X", raising=False)
    config = env_database("DATABASE_URL_X", "postgres://u@db.example:5433/x")
    assert (config["ENGINE"], config["HOST"], config["PORT"]) == (
        "django.db.backends.postgresql",
        "db.example",
        5433,
    )


def test_the_development_database_is_reached_through_its_socket_folder(monkeypatch):
    monkeypatch.delenv("DATABASE_URL_X", raising=False)
    url = development_database_url(Path("/srv/a checkout/var/postgres"))
    config = env_database("DATABASE_URL_X", url)
    assert config["HOST"] == "/srv/a checkout/var/postgres"
    assert (config["NAME"], config["USER"]) == ("nightshift", "nightshift")


def test_a_relative_path_is_refused(monkeypatch):
    monkeypatch.setenv("JOBS_X", "var/jobs")
    with pytest.raises(ImproperlyConfigured, match="JOBS_X must be an absolute path"):
        env_path("JOBS_X", "/x")


def test_a_redis_url_must_be_a_redis_url(monkeypatch):
    monkeypatch.setenv("REDIS_URL_X", "http://127.0.0.1")
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL_X must be a URL"):
        env_url("REDIS_URL_X", "redis://127.0.0.1:6379/0", schemes=("redis", "rediss"))


def test_an_internal_prefix_must_start_and_end_with_a_slash(monkeypatch):
    monkeypatch.setenv("PREFIX_X", "_jobfiles")
    with pytest.raises(ImproperlyConfigured, match="PREFIX_X must start and end with a slash"):
        env_url_prefix("PREFIX_X", "/_jobfiles/")
    monkeypatch.setenv("PREFIX_X", "/_jobfiles/")
    assert env_url_prefix("PREFIX_X", "/_jobfiles/") == "/_jobfiles/"


def settings_printed(names: str, **environment: str) -> list[str]:
    """Settings as a fresh process reads them from this environment."""
    kept = {
        key: value
        for key, value in os.environ.items()
        if key not in ("NIGHTSHIFT_JOBS_DIR", "NIGHTSHIFT_DATASETS_DIR", "NIGHTSHIFT_SHARED_DIR")
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from django.conf import settings; import django; django.setup(); "
            f"print(*[getattr(settings, name) for name in {names.split()!r}])",
        ],
        env=kept | environment | {"DJANGO_SETTINGS_MODULE": "portal.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_one_shared_folder_holds_the_job_folders_and_the_datasets():
    jobs, datasets = settings_printed(
        "JOBS_DIR DATASETS_DIR", NIGHTSHIFT_SHARED_DIR="/srv/campus-share"
    )
    assert (jobs, datasets) == ("/srv/campus-share/jobs", "/srv/campus-share/datasets")
    jobs, datasets = settings_printed(
        "JOBS_DIR DATASETS_DIR",
        NIGHTSHIFT_SHARED_DIR="/srv/campus-share",
        NIGHTSHIFT_JOBS_DIR="/scratch/jobs",
    )
    assert (jobs, datasets) == ("/scratch/jobs", "/srv/campus-share/datasets")
    [var, shared] = settings_printed("VAR_DIR SHARED_DIR", NIGHTSHIFT_VAR_DIR="/var/lib/x")
    assert var == shared == "/var/lib/x"  # one host: everything in its var folder


@pytest.mark.parametrize("mode, interval", [("shared", "3600"), ("spool", "600")])
def test_spool_mode_checkpoints_more_often_by_default(mode, interval):
    environment = {k: v for k, v in os.environ.items() if k != "NIGHTSHIFT_CHECKPOINT_INTERVAL_S"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from django.conf import settings; import django; django.setup(); "
            "print(settings.CHECKPOINT_INTERVAL_S)",
        ],
        env=environment | {"CONDOR_FILE_MODE": mode, "DJANGO_SETTINGS_MODULE": "portal.settings"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.strip() == interval
