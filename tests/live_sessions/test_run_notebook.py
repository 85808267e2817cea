"""nightshift.run_notebook() and the launcher's live services, run as a job runs them,
with stand-ins for JupyterLab and TensorBoard that record how they were started."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import copy_job_helpers

RUNTIME = Path(__file__).resolve().parents[2] / "jobs" / "runtime"
FAKE_JUPYTERLAB = """
import json, os, sys, time
json.dump({"argv": sys.argv, "token": os.environ.get("JUPYTER_TOKEN"), "cwd": os.getcwd(),
           "service": os.environ.get("NIGHTSHIFT_LIVE_SERVICE"),
           "state": {k: v for k, v in os.environ.items()
                     if k.startswith(("JUPYTER", "IPYTHON")) and k != "JUPYTER_TOKEN"}},
          open(os.environ["RECORD"], "w"))
time.sleep(float(os.environ.get("SERVE_FOR", "60")))
"""


@pytest.fixture
def job_folder(tmp_path):
    (tmp_path / ".nightshift").mkdir()
    (tmp_path / ".nightshift" / "live-secret").write_text("the-token\n")
    fake = tmp_path / "fake" / "jupyterlab"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(FAKE_JUPYTERLAB)
    return tmp_path


def start(folder: Path, **environment: str) -> subprocess.Popen:
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": f"{RUNTIME}:{folder / 'fake'}",
        "NIGHTSHIFT_LIVE_PORT": "41000",
        "NIGHTSHIFT_LIVE_PATH": "/live/abc/",
        "NIGHTSHIFT_OUTPUT_DIR": "outputs",
        "RECORD": str(folder / "record.json"),
        **environment,
    }
    return subprocess.Popen(
        [sys.executable, "-c", "import nightshift; nightshift.run_notebook()"], cwd=folder, env=env
    )


def ended(folder: Path) -> dict:
    return json.loads((folder / ".nightshift" / "session-end.json").read_text())


def test_jupyterlab_starts_under_the_proxys_path_on_the_session_folder(job_folder):
    process = start(job_folder, NIGHTSHIFT_SESSION_LIMIT_S="2", NIGHTSHIFT_SESSION_IDLE_S="900")
    assert process.wait(timeout=60) == 0
    record = json.loads((job_folder / "record.json").read_text())
    argv = record["argv"][1:]
    assert "--ServerApp.ip=127.0.0.1" in argv and "--ServerApp.port=41000" in argv
    assert "--ServerApp.base_url=/live/abc/notebook/" in argv
    assert f"--ServerApp.root_dir={job_folder / 'outputs'}" in argv
    assert "--ServerApp.shutdown_no_activity_timeout=900" in argv
    assert "--MappingKernelManager.cull_idle_timeout=900" in argv
    # The token reaches Jupyter in its environment, never on a command line others can read.
    assert record["token"] == "the-token"
    assert not any("the-token" in word for word in record["argv"])
    assert record["cwd"] == str(job_folder / "outputs")
    # Jupyter keeps its state (open tabs, settings) in the session, not in a home folder
    # every job on the workstation shares.
    assert set(record["state"]) == {"JUPYTERLAB_WORKSPACES_DIR", "JUPYTERLAB_SETTINGS_DIR"}
    for folder in record["state"].values():
        assert folder.startswith(str(job_folder / ".nightshift" / "jupyter"))
    assert ended(job_folder)["reason"] == "time limit"


def test_a_jupyterlab_that_stops_by_itself_ended_idle(job_folder):
    process = start(job_folder, SERVE_FOR="0.2")
    assert process.wait(timeout=60) == 0
    assert ended(job_folder)["reason"] == "idle"


def test_htcondor_stopping_the_job_stops_jupyterlab_and_says_so(job_folder):
    process = start(job_folder)
    deadline = time.monotonic() + 30
    while not (job_folder / "record.json").exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    assert ended(job_folder)["reason"] == "stopped"


FAKE_TENSORBOARD = """#!/bin/sh
env > "$RECORD.env"
echo "$@" > "$RECORD.argv"
"""


def test_the_launcher_starts_tensorboard_beside_the_job_and_gives_a_served_job_its_port(tmp_path):
    copy_job_helpers(tmp_path)
    # The job's Python, with the stand-in TensorBoard beside it, as an environment has it.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(os.path.realpath(sys.executable))
    (bin_dir / "tensorboard").write_text(FAKE_TENSORBOARD)
    (bin_dir / "tensorboard").chmod(0o755)
    (tmp_path / "train.py").write_text(
        "import json, os, time\ntime.sleep(1)\n"
        "json.dump({k: v for k, v in os.environ.items() if k.startswith('NIGHTSHIFT_')},"
        " open('job-env.json', 'w'))\n"
    )
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "NIGHTSHIFT_LIVE": "tensorboard,serve",
        "NIGHTSHIFT_LIVE_PATH": "/live/abc/",
        "RECORD": str(tmp_path / "tb"),
        "PYTHONPATH": ".nightshift",
    }
    command = [str(bin_dir / "python"), ".nightshift/launch.py", "train.py"]
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    argv = (tmp_path / "tb.argv").read_text().split()
    assert argv[argv.index("--logdir") + 1] == "outputs/tensorboard"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--path_prefix") + 1] == "/live/abc/tensorboard"
    tensorboard_env = dict(
        line.split("=", 1) for line in (tmp_path / "tb.env").read_text().splitlines() if "=" in line
    )
    assert tensorboard_env["NIGHTSHIFT_LIVE_SERVICE"] == "tensorboard"
    assert tensorboard_env["NIGHTSHIFT_LIVE_PORT"] == argv[argv.index("--port") + 1]
    job_env = json.loads((tmp_path / "job-env.json").read_text())
    assert job_env["NIGHTSHIFT_LIVE_SERVICE"] == "serve"
    assert job_env["NIGHTSHIFT_SERVE_PORT"] == job_env["NIGHTSHIFT_LIVE_PORT"]
    assert job_env["NIGHTSHIFT_SERVE_PORT"] != tensorboard_env["NIGHTSHIFT_LIVE_PORT"]
    assert (tmp_path / "outputs" / "tensorboard").is_dir()
