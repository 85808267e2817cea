"""The execute-node kit's files, read by HTCondor's own configuration parser (the personal
pool's), and the join script's refusals."""

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import CLEAN_ENV, POOL_ROOT

KIT = Path(__file__).resolve().parents[2] / "deploy" / "execute-node"


def config_of(files: dict[str, str], *names: str, env: dict[str, str] | None = None) -> list[str]:
    """condor_config_val inside the pool's root, with only the given config files."""
    folder = POOL_ROOT / "tmp" / "kit-config"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "config.d").mkdir(parents=True)
    for name, text in files.items():
        (folder / "config.d" / name).write_text(text)
    (folder / "condor_config").write_text(
        "RELEASE_DIR = C:\\condor\nLIBEXEC = C:\\condor\\libexec\n"
        "LOCAL_CONFIG_DIR = /tmp/kit-config/config.d\n"
    )
    try:
        done = subprocess.run(
            [
                "chroot",
                str(POOL_ROOT),
                "env",
                *[f"{k}={v}" for k, v in (env or {}).items()],
                "CONDOR_CONFIG=/tmp/kit-config/condor_config",
                "condor_config_val",
                *names,
            ],
            env=CLEAN_ENV,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.condor
def test_a_windows_workstation_runs_the_powershell_probe_with_the_same_policy():
    files = {
        "40-nightshift-execute.conf": (KIT / "nightshift-execute.conf").read_text(),
        "41-nightshift-execute-windows.conf": (KIT / "nightshift-execute-windows.conf").read_text(),
    }
    executable, args, mode, start = config_of(
        files,
        "STARTD_CRON_OWNERGPU_EXECUTABLE",
        "STARTD_CRON_OWNERGPU_ARGS",
        "STARTD_CRON_OWNERGPU_MODE",
        "START",
        env={"SystemRoot": "C:\\Windows"},
    )
    # The PowerShell probe reports once, so the startd starts it each period.
    assert mode == "Periodic"
    assert executable == "C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe"
    assert args.endswith(
        "-File C:\\condor\\libexec\\nightshift-owner-gpu-probe.ps1 "
        "-Override C:\\condor\\nightshift-owner-gpu"
    )
    assert "!(OwnerGpuActive =?= True)" in start


@pytest.mark.condor
def test_a_linux_workstation_keeps_one_probe_running_that_reports_each_period():
    files = {"40-nightshift-execute.conf": (KIT / "nightshift-execute.conf").read_text()}
    names = (
        "STARTD_CRON_OWNERGPU_ARGS",
        "STARTD_CRON_OWNERGPU_MODE",
        "STARTD_CRON_OWNERGPU_PERIOD",
    )
    args, mode, period = config_of(files, *names)
    assert args == "--override /etc/condor/nightshift-owner-gpu --every 5"
    assert (mode, period) == ("WaitForExit", "5s")


@pytest.mark.parametrize(
    "central_manager",
    ["cm.campus.example\nSTART = True", "cm; rm -rf /", "$(CONDOR_HOST)", "cm campus", ""],
)
def test_join_refuses_a_central_manager_that_is_not_a_host_name(tmp_path, central_manager):
    token = tmp_path / "ws.token"
    token.write_text("eyJ...")
    done = subprocess.run(
        [
            "bash",
            str(KIT / "join-pool.sh"),
            "--central-manager",
            central_manager,
            "--token-file",
            str(token),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1
    assert "--central-manager" in done.stderr


def test_join_refuses_an_unknown_policy(tmp_path):
    token = tmp_path / "ws.token"
    token.write_text("eyJ...")
    done = subprocess.run(
        [
            "bash",
            str(KIT / "join-pool.sh"),
            "--central-manager",
            "cm.campus.example",
            "--token-file",
            str(token),
            "--availability",
            "weekends",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, "idle, nights or both" in done.stderr) == (1, True)
