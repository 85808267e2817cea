import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from accounts import services as account_services

NIGHTSHIFT = str(Path(sys.executable).with_name("nightshift"))


@dataclass
class Run:
    status: int
    stdout: str
    stderr: str


@pytest.fixture
def cli_env(tmp_path):
    """A clean environment for the console script: its own config folder, no inherited token."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("NIGHTSHIFT_")}
    env |= {"XDG_CONFIG_HOME": str(tmp_path / "config"), "COLUMNS": "200", "NO_COLOR": "1"}
    return env


@pytest.fixture
def nightshift(cli_env, tmp_path):
    """Runs the installed `nightshift` console script, as a user would."""

    def run(*args: str, input: str | None = None, timeout: float = 60, **env: str) -> Run:
        done = subprocess.run(
            [NIGHTSHIFT, *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=cli_env | env,
            cwd=tmp_path,
        )
        return Run(done.returncode, done.stdout, done.stderr)

    return run


@pytest.fixture
def logged_in(nightshift, live_server, django_user_model, cli_env):
    """A user with a token, and the CLI pointed at the live server through the environment."""
    user = django_user_model.objects.create_user("ada", password="a-long-test-password")
    secret = account_services.token_create(user=user, name="cli tests").secret
    cli_env |= {"NIGHTSHIFT_URL": live_server.url, "NIGHTSHIFT_TOKEN": secret}
    return user


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)
