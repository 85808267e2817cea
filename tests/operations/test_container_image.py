"""The container kit: Docker cannot run here, so the Dockerfile is linted, and the image's
contents are built here with the very install command its build runs; the result passes
`check --deploy` with the production settings and starts gunicorn's configuration."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.security.test_deploy_settings import production_env

ROOT = Path(__file__).resolve().parents[2]
CONTAINER = ROOT / "deploy" / "production" / "container"
DOCKERFILE = CONTAINER / "Dockerfile"


def final_stage(text: str) -> list[str]:
    return text.split("\nFROM ")[-1].splitlines()


def test_the_dockerfile_passes_hadolint():
    hadolint = Path(sys.executable).with_name("hadolint")
    done = subprocess.run(
        [str(hadolint), str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_is_built_in_two_stages_and_runs_as_an_unprivileged_user():
    text = DOCKERFILE.read_text()
    assert text.count("\nFROM ") == 2 and " AS build" in text
    assert "RUN deploy/production/install-app /opt/nightshift/app /opt/nightshift/venv" in text
    users = [line.split()[1] for line in final_stage(text) if line.startswith("USER ")]
    assert users == ["10001"]
    assert "useradd --system --uid 10001" in text
    assert not any(line.startswith("RUN") and "gcc" in line for line in final_stage(text))


def test_compose_runs_web_workers_beat_and_migrations_from_that_image_with_its_services():
    compose = yaml.safe_load((CONTAINER / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"db", "redis", "migrate", "web", "worker", "beat", "live"}
    for name in ("migrate", "web", "worker", "beat", "live"):
        build = services[name]["build"]
        assert (CONTAINER / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
        assert services[name]["image"] == "nightshift:latest"
    assert services["db"]["image"].startswith("postgres:")
    assert services["redis"]["image"].startswith("redis:")
    assert services["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["web"]["ports"] == ["127.0.0.1:8000:8000"]
    kubernetes_live = yaml.safe_load(
        (CONTAINER.parent / "kubernetes" / "live.yaml").read_text().split("\n---\n")[0]
    )
    [container] = kubernetes_live["spec"]["template"]["spec"]["containers"]
    assert services["live"]["command"] == container["command"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The image's /opt/nightshift, made here by the Dockerfile's own install command from
    the files its build context holds (git's tracked files, less .dockerignore's)."""
    root = tmp_path_factory.mktemp("image")
    app, venv, static = root / "app", root / "venv", root / "static"
    listing = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    tracked = (
        subprocess.run(listing, cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    ignored = (".ci/", "var/")
    for name in filter(None, tracked):
        if name.startswith(ignored) or not (ROOT / name).exists():
            continue
        target = app / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "NIGHTSHIFT_STATIC_ROOT": str(static),
    }
    done = subprocess.run(
        [str(app / "deploy" / "production" / "install-app"), str(app), str(venv)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return app, venv, static


def test_the_image_contents_hold_the_portal_and_its_static_files(built, tmp_path):
    app, venv, static = built
    for command in ("gunicorn", "celery", "python"):
        assert (venv / "bin" / command).exists()
    # Celery imports the portal from anywhere, not only from the source folder.
    env = {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "SECRET_KEY": "x",
    }
    setup = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import django; django.setup(); import portal.celery"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert setup.returncode == 0, setup.stderr
    assert (static / "admin" / "css" / "base.css").exists()
    assert list(static.glob("css/*.css.gz")), "whitenoise's compressed copies"


def test_the_image_contents_pass_check_deploy_with_the_production_settings(built, tmp_path):
    app, venv, static = built
    env = production_env(tmp_path, NIGHTSHIFT_STATIC_ROOT=str(static))
    done = subprocess.run(
        [str(venv / "bin" / "python"), "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    config = subprocess.run(
        [
            str(venv / "bin" / "gunicorn"),
            "--check-config",
            "--config",
            "deploy/production/gunicorn.conf.py",
            "portal.wsgi",
        ],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert config.returncode == 0, config.stdout + config.stderr
