"""deploy/production/systemd: units systemd itself accepts, each run by the unprivileged
service account with the settings file and a restart policy, hardened (systemd's own
exposure score), and the timeouts and limits that must agree between gunicorn, nginx and
the portal's settings do."""

import configparser
import re
import runpy
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ROOT / "deploy" / "production"
UNITS = PRODUCTION / "systemd"
SERVICES = [
    "nightshift-web.service",
    "nightshift-worker@.service",
    "nightshift-beat.service",
    "nightshift-live.service",
]
VENV = Path(sys.executable).parent.parent


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read(UNITS / name)
    return parser


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The units as a host would have them, pointed at this checkout and its venv."""
    folder = tmp_path_factory.mktemp("units")
    for path in UNITS.iterdir():
        text = path.read_text().replace("/opt/nightshift/venv", str(VENV))
        (folder / path.name).write_text(text.replace("/opt/nightshift/app", str(ROOT)))
    shutil.copy(folder / "nightshift-worker@.service", folder / "nightshift-worker@1.service")
    return folder


@pytest.mark.parametrize(
    "name",
    [
        "nightshift-web.service",
        "nightshift-worker@1.service",
        "nightshift-beat.service",
        "nightshift-live.service",
        "nightshift.target",
    ],
)
def test_systemd_accepts_the_unit(installed, name):
    done = subprocess.run(
        ["systemd-analyze", "verify", str(installed / name)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


@pytest.mark.parametrize(
    "name",
    [
        "nightshift-web.service",
        "nightshift-worker@1.service",
        "nightshift-beat.service",
        "nightshift-live.service",
    ],
)
def test_each_service_is_hardened(installed, name):
    done = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", str(installed / name)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    score = float(re.search(r"Overall exposure level for \S+: ([\d.]+)", done.stdout).group(1))
    assert score <= 2.5, done.stdout  # systemd rates up to 3.9 "OK"; a default service is 9.6


@pytest.mark.parametrize("name", SERVICES)
def test_each_service_runs_as_the_service_account_with_the_settings_file(name):
    service = unit(name)["Service"]
    assert (service["User"], service["Group"]) == ("nightshift", "nightshift")
    assert service["EnvironmentFile"] == "/etc/nightshift/nightshift.env"
    assert service["Restart"] in ("always", "on-failure")
    for option, value in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("PrivateTmp", "yes"),
        ("ProtectHome", "yes"),
    ]:
        assert service[option] == value, option
    # The shared folder: job folders and datasets (NIGHTSHIFT_SHARED_DIR in the example).
    assert service["ReadWritePaths"].split() == [example_env()["NIGHTSHIFT_SHARED_DIR"]]


def test_the_target_starts_every_part():
    wants = unit("nightshift.target")["Unit"]["Wants"].split()
    assert wants == [
        "nightshift-web.service",
        "nightshift-worker@1.service",
        "nightshift-beat.service",
        "nightshift-live.service",
    ]


def example_env() -> dict[str, str]:
    return dict(
        line.split("=", 1)
        for line in (PRODUCTION / "nightshift.env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )


def nginx_value(name: str) -> str:
    site = (PRODUCTION / "nginx" / "nightshift.conf").read_text()
    return re.search(rf"^\s*{name}\s+([^;]+);", site, re.MULTILINE).group(1)


def gunicorn_settings() -> dict:
    """What deploy/production/gunicorn.conf.py sets, as gunicorn reads it."""
    return runpy.run_path(str(PRODUCTION / "gunicorn.conf.py"))


def test_gunicorn_nginx_and_the_settings_agree():
    namespace = gunicorn_settings()
    assert nginx_value("proxy_read_timeout") == f"{namespace['timeout']}s"
    assert (
        namespace["bind"] == "127.0.0.1:8000"
        and "server 127.0.0.1:8000;" in (PRODUCTION / "nginx" / "nightshift.conf").read_text()
    )
    limit_mb = int(nginx_value("client_max_body_size").removesuffix("m"))
    assert settings.MAX_UPLOAD_MB < limit_mb <= settings.MAX_UPLOAD_MB + 64
    env = example_env()
    site = (PRODUCTION / "nginx" / "nightshift.conf").read_text()
    outputs = site.split(f"location {env['NIGHTSHIFT_ACCEL_REDIRECT_PREFIX']} {{", 1)[1]
    assert re.search(r"alias ([^;]+);", outputs).group(1) == env["NIGHTSHIFT_SHARED_DIR"] + "/jobs/"
    datasets = site.split(f"location {env['NIGHTSHIFT_DATASET_ACCEL_REDIRECT_PREFIX']} {{", 1)[1]
    assert re.search(r"alias ([^;]+);", datasets).group(1) == (
        env["NIGHTSHIFT_SHARED_DIR"] + "/datasets/objects/"
    )
    static = site.split("location /static/ {", 1)[1]
    assert re.search(r"alias ([^;]+);", static).group(1) == (
        env["NIGHTSHIFT_VAR_DIR"] + "/staticfiles/"
    )


def upstream_keepalive_timeout_s(site: str) -> int:
    """How long nginx keeps an idle connection to the site's upstream open for reuse."""
    text = (PRODUCTION / "nginx" / site).read_text()
    upstream = re.search(r"^upstream \w+ \{(.*?)^\}", text, re.MULTILINE | re.DOTALL).group(1)
    return int(re.search(r"^\s*keepalive_timeout\s+(\d+)s;", upstream, re.MULTILINE).group(1))


def keep_alive_s(command: list[str]) -> int:
    """uvicorn's --timeout-keep-alive in a command line; its default is 5 s."""
    if "--timeout-keep-alive" not in command:
        return 5
    return int(command[command.index("--timeout-keep-alive") + 1])


def test_nginx_closes_an_idle_connection_before_the_server_behind_it_does():
    """nginx keeps idle connections to gunicorn and uvicorn for reuse. Were the server to close
    one first, a request nginx sends down it as it closes fails, and a PATCH or POST, which
    nginx does not retry, reaches the client as a 502 (a resumable upload's chunk did, with
    gunicorn's default of 2 s)."""
    assert gunicorn_settings()["keepalive"] > upstream_keepalive_timeout_s("nightshift.conf")
    # The compose file and the Kubernetes manifest start uvicorn with the unit's options
    # (test_kubernetes_manifests, test_container_image).
    live = shlex.split(unit("nightshift-live.service")["Service"]["ExecStart"])
    assert keep_alive_s(live) > upstream_keepalive_timeout_s("nightshift-live.conf")


def test_gunicorn_accepts_its_configuration():
    done = subprocess.run(
        [
            str(VENV / "bin" / "gunicorn"),
            "--check-config",
            "--config",
            str(PRODUCTION / "gunicorn.conf.py"),
            "portal.wsgi",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
