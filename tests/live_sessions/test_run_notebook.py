"""nightshift.run_notebook() and the launcher's live services, run as a job runs them,
with stand-ins for JupyterLab and TensorBoard that record how they were started."""

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from condor_bridge.live_probe import probe
from tests.helpers import copy_job_helpers, wait_for

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
        "NIGHTSHIFT_LIVE_SOCKET": str(folder / "live" / "notebook.sock"),
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
    # On the job's own Unix socket, never a port of the loopback every job shares.
    assert f"--ServerApp.sock={job_folder / 'live' / 'notebook.sock'}" in argv
    assert "--ServerApp.sock_mode=0600" in argv
    assert not any(word.startswith(("--ServerApp.ip", "--ServerApp.port")) for word in argv)
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
    state = dict(record["state"])
    # The kernels' keys beside the socket, in the job's private folder.
    assert state.pop("JUPYTER_RUNTIME_DIR") == str(job_folder / "live" / "jupyter-runtime")
    assert set(state) == {"JUPYTERLAB_WORKSPACES_DIR", "JUPYTERLAB_SETTINGS_DIR"}
    for folder in state.values():
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


def loopback_listeners_of(service: str, scratch: str) -> list[int]:
    """The TCP ports the job's processes of `service` listen on."""
    listening = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A":
                listening[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
    ports = []
    for pid in (name for name in os.listdir("/proc") if name.isdigit()):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            fds = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        mine = f"_CONDOR_SCRATCH_DIR={scratch}".encode() in environ
        if mine and f"NIGHTSHIFT_LIVE_SERVICE={service}".encode() in environ:
            ports += [listening[f[8:-1]] for f in fds if f[8:-1] in listening]
    return ports


def http_over(socket_path: Path, path: str) -> httpx.Response:
    transport = httpx.HTTPTransport(uds=str(socket_path))
    with httpx.Client(transport=transport, base_url="http://127.0.0.1", timeout=5) as client:
        return client.get(path)


def test_the_launcher_serves_tensorboard_on_the_jobs_own_socket_and_no_port(tmp_path):
    copy_job_helpers(tmp_path)
    # A short scratch path, as HTCondor's: a socket's path must fit in 108 bytes.
    scratch = Path(tempfile.mkdtemp(prefix="ns-scratch-"))
    (tmp_path / "train.py").write_text(
        "import json, os, time\n"
        "json.dump({k: v for k, v in os.environ.items() if k.startswith('NIGHTSHIFT_')},"
        " open('job-env.json', 'w'))\n"
        "while not os.path.exists('done'):\n    time.sleep(0.2)\n"
    )
    env = {
        "PATH": os.environ["PATH"],
        "NIGHTSHIFT_LIVE": "tensorboard,serve",
        "NIGHTSHIFT_LIVE_PATH": "/live/abc/",
        "PYTHONPATH": ".nightshift",
        "_CONDOR_SCRATCH_DIR": str(scratch),
    }
    # The portal's own Python has TensorBoard, as a job's environment would.
    launcher = subprocess.Popen(
        [sys.executable, ".nightshift/launch.py", "train.py"],
        cwd=tmp_path,
        env=env,
        start_new_session=True,
    )
    try:
        sockets = scratch / ".nightshift-live"
        board = sockets / "tensorboard.sock"
        wait_for(lambda: board.is_socket(), timeout=90, what="TensorBoard's socket")
        answer = http_over(board, "/live/abc/tensorboard/data/environment")
        assert answer.status_code == 200
        assert answer.json()["data_location"] == "outputs/tensorboard"
        # Only the job's account may enter the folder; nothing of TensorBoard's is on a
        # port (its fast loader's data server would be).
        assert stat.S_IMODE(sockets.stat().st_mode) == 0o700
        assert loopback_listeners_of("tensorboard", str(scratch)) == []
        assert probe(str(scratch))["services"] == {"tensorboard": str(board)}
        # A served job gets a socket in the same folder, and a port for servers that
        # cannot use one.
        job_env = json.loads((tmp_path / "job-env.json").read_text())
        assert job_env["NIGHTSHIFT_LIVE_SERVICE"] == "serve"
        assert job_env["NIGHTSHIFT_SERVE_SOCKET"] == str(sockets / "serve.sock")
        assert job_env["NIGHTSHIFT_LIVE_SOCKET"] == job_env["NIGHTSHIFT_SERVE_SOCKET"]
        assert job_env["NIGHTSHIFT_SERVE_PORT"] == job_env["NIGHTSHIFT_LIVE_PORT"]
        assert (tmp_path / "outputs" / "tensorboard").is_dir()
        (tmp_path / "done").touch()
        assert launcher.wait(timeout=60) == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(launcher.pid, signal.SIGKILL)
        shutil.rmtree(scratch, ignore_errors=True)
