"""Nightshift's launcher: put the job's datasets and packages in place, then run its script.

    python3 .nightshift/launch.py train.py --epochs 10

Datasets come first (nightshift_data.py), then the environment (environment_cache.py: the
workstation's shared cache, or the job's own sandbox), then the live services the job asked
for and the GPU sampler; then the script runs in the launcher's place. Everything that is
installed is logged to .nightshift/install.log, which the job page shows. No shell ever
runs: only argument lists.
"""

import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import nightshift_data
from environment_cache import (
    LOCK_FILE,
    InstallFailed,
    Log,
    cached_environment,
    environment_from_keeper,
    find_cache,
    find_uv,
    install,
    machine_attribute,
    say,
)

HELPER_DIR = os.path.dirname(os.path.abspath(__file__))
LOG = os.path.join(HELPER_DIR, "install.log")
ENVIRONMENT_FILE = os.path.join(HELPER_DIR, "environment.json")
# Outside the helper folder, which travels back to the portal: a sandbox install must not.
SANDBOX_VENV = ".nightshift-venv"
SANDBOX_UV_CACHE = ".nightshift-uv-cache"


def check_python(log: Log, record: dict) -> None:
    wanted = record.get("python_version")
    here = "{}.{}".format(*sys.version_info[:2])
    if wanted and wanted != here:
        message = (
            f"the environment {record.get('reference', '')} was locked for Python "
            f"{wanted}, and this workstation's Python is {here}: make a version of the "
            f"environment for Python {here}"
        )
        log.line(message)
        say(message)
        sys.exit(3)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# A Unix socket's path must fit sockaddr_un (108 bytes with its NUL).
SOCKET_PATH_MAX = 100


def live_socket_folder() -> str:
    """A folder only the job's account may enter, for its live services' Unix sockets.

    Every job on a workstation shares its loopback address, so a port on 127.0.0.1 is open
    to all of them; a socket in this folder is open to the job's own account alone. It is
    in the job's scratch folder (HTCondor removes it with the job), or under /tmp where that
    path is too long for a socket (/tmp is the job's own where the kit mounts it so)."""
    scratch = os.environ.get("_CONDOR_SCRATCH_DIR") or os.getcwd()
    folder = os.path.join(scratch, ".nightshift-live")
    if len(os.path.join(folder, "tensorboard.sock")) > SOCKET_PATH_MAX:
        return tempfile.mkdtemp(prefix="nightshift-live-")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


# TensorBoard serving on a Unix socket: its own server class, since its command line knows
# only ports (werkzeug binds "unix://PATH" itself). --load_fast=false keeps its Rust data
# server, which would listen on a loopback port, from starting.
TENSORBOARD_ON_SOCKET = """
import sys
from tensorboard import default, program

class UnixSocketServer(program.WerkzeugServer):
    def get_url(self):
        return "http://localhost:0" + (self._flags.path_prefix or "") + "/"

    def print_serving_message(self):
        print("TensorBoard serves on", self.server_address, flush=True)

board = program.TensorBoard(plugins=default.get_plugins(), server_class=UnixSocketServer)
board.configure(argv=["tensorboard", *sys.argv[1:]])
sys.exit(board.main())
"""


FIND_TENSORBOARD = (
    "import importlib.util, sys; sys.exit(importlib.util.find_spec('tensorboard') is None)"
)


def tensorboard_python(python: str) -> str | None:
    """The Python whose environment has TensorBoard: the job's, else the workstation's."""
    candidates = [python, shutil.which("python3")]
    for candidate in (c for c in candidates if c and os.access(c, os.X_OK)):
        found = subprocess.run(  # noqa: S603 - an argument list
            [candidate, "-c", FIND_TENSORBOARD],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        if found.returncode == 0:
            return candidate
    return None


def tensorboard_dir() -> str:
    # The same folder as nightshift.tensorboard_dir(): inside the outputs, so that it is
    # kept, and a finished job's TensorBoard reads it.
    default = os.path.join(os.environ.get("NIGHTSHIFT_OUTPUT_DIR") or "outputs", "tensorboard")
    return os.environ.get("NIGHTSHIFT_TENSORBOARD_DIR") or default


def start_live_services(python: str) -> None:
    """The web services the job asked for, each on a Unix socket in the job's own folder
    (a served job may bind a port of 127.0.0.1 instead), which the portal's probe finds by
    the NIGHTSHIFT_LIVE_* variables in their environments."""
    services = [s for s in os.environ.get("NIGHTSHIFT_LIVE", "").split(",") if s]
    if not services:
        return
    path = os.environ.get("NIGHTSHIFT_LIVE_PATH", "/live/job/")
    sockets = live_socket_folder()
    if "tensorboard" in services:
        folder = tensorboard_dir()
        os.makedirs(folder, exist_ok=True)
        program = tensorboard_python(python)
        if program is None:
            say(
                "TensorBoard is not installed in the job's environment: add tensorboard to "
                "it to see the job's event files live"
            )
        else:
            socket_path = os.path.join(sockets, "tensorboard.sock")
            environment = dict(
                os.environ,
                NIGHTSHIFT_LIVE_SERVICE="tensorboard",
                NIGHTSHIFT_LIVE_SOCKET=socket_path,
            )
            environment.pop("NIGHTSHIFT_LIVE_PORT", None)
            with open(os.path.join(HELPER_DIR, "tensorboard.log"), "ab") as log:
                # An argument list, never a shell. It stops with the job: HTCondor ends
                # every process the job started.
                subprocess.Popen(  # noqa: S603
                    [
                        program,
                        "-c",
                        TENSORBOARD_ON_SOCKET,
                        "--logdir",
                        folder,
                        "--host",
                        f"unix://{socket_path}",
                        "--port",
                        "0",
                        "--load_fast",
                        "false",
                        "--path_prefix",
                        f"{path}tensorboard",
                        "--reload_interval",
                        "5",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=environment,
                )
            say(f"TensorBoard serves {folder} on the job's own socket")
    if "serve" in services:
        socket_path = os.path.join(sockets, "serve.sock")
        port = free_port()
        # The job's own endpoint: it listens on $NIGHTSHIFT_SERVE_SOCKET, which only the
        # job's account reaches, or binds 127.0.0.1:$NIGHTSHIFT_SERVE_PORT, which every job
        # on the workstation reaches.
        os.environ.update(
            NIGHTSHIFT_SERVE_SOCKET=socket_path,
            NIGHTSHIFT_SERVE_PORT=str(port),
            NIGHTSHIFT_LIVE_SERVICE="serve",
            NIGHTSHIFT_LIVE_SOCKET=socket_path,
            NIGHTSHIFT_LIVE_PORT=str(port),
        )
    elif "notebook" in services:
        # A session: its script is nightshift.run_notebook(), JupyterLab on this socket.
        os.environ.update(
            NIGHTSHIFT_LIVE_SERVICE="notebook",
            NIGHTSHIFT_LIVE_SOCKET=os.path.join(sockets, "notebook.sock"),
        )


# The job's GPUs, sampled with nvidia-smi beside the job, for workstations whose startd does
# not monitor GPUs (the portal prefers HTCondor's own figures where it has them).
GPU_SAMPLES = os.path.join(HELPER_DIR, "gpu-usage.jsonl")
GPU_SAMPLES_MAX_BYTES = 20 * 1024 * 1024
GPU_QUERY = "--query-gpu=index,uuid,utilization.gpu,memory.used,power.draw"


def find_nvidia_smi():
    found = shutil.which("nvidia-smi")
    return found or next((p for p in ("/usr/bin/nvidia-smi",) if os.access(p, os.X_OK)), None)


def visible_gpus() -> list:
    return [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]


def start_gpu_sampler() -> None:
    """Sample the job's GPUs until the job (this process, once it has become the script)
    exits. Only where there is something to sample."""
    if os.name != "posix" or not visible_gpus() or find_nvidia_smi() is None:
        return
    subprocess.Popen(  # noqa: S603 - this very file, as an argument list
        [sys.executable, os.path.abspath(__file__), "--sample-gpus", str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def gpu_sample(smi: str, visible: list, card: dict | None = None):
    """One line of samples: each of the job's devices, its busy share, memory in use and
    power draw; `card` adds what the workstation says of its cards (their idle draw, and
    whether they are simulated)."""
    try:
        result = subprocess.run(  # noqa: S603
            [smi, GPU_QUERY, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    devices = []
    for line in result.stdout.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 5:
            continue
        index, uuid, utilization, memory, power = fields
        # CUDA_VISIBLE_DEVICES names devices by index or by (the start of) their UUID.
        if not any(v == index or uuid.startswith(v) for v in visible):
            continue
        try:
            device = {
                "uuid": uuid,
                "utilization": float(utilization) / 100,
                "memory_mb": float(memory),
            }
        except ValueError:
            continue
        # "[N/A]" where the card cannot measure its draw: that device's samples carry none.
        if re.fullmatch(r"\d+(\.\d+)?", power):
            device["power_w"] = float(power)
        devices.append(device)
    if not devices:
        return None
    return {"time": round(time.time(), 3), "devices": devices, **(card or {})}


def card_facts() -> dict:
    """What the workstation's kit says of its cards: the idle draw it measured or was told
    (NIGHTSHIFT_GPU_IDLE_WATTS), and whether they are the personal pool's simulated ones."""
    facts = {}
    try:
        idle = float(machine_attribute("NightshiftGpuIdleWatts") or "")
        if 0 <= idle < 5000:
            facts["idle_w"] = idle
    except (TypeError, ValueError):
        pass
    if str(machine_attribute("NightshiftGpusSimulated") or "").lower() == "true":
        facts["simulated"] = True
    return facts


def sample_gpus(job_pid: int) -> None:
    smi, visible = find_nvidia_smi(), visible_gpus()
    # The workstation's own choice (the execute-node kit's NIGHTSHIFT_GPU_SAMPLE_SECONDS).
    try:
        interval = max(float(machine_attribute("NightshiftGpuSampleSeconds") or 10), 1.0)
    except (TypeError, ValueError):
        interval = 10.0
    card = card_facts()
    time.sleep(min(interval, 2.0))
    while smi:
        try:
            os.kill(job_pid, 0)
        except OSError:
            return  # the job has ended
        sample = gpu_sample(smi, visible, card)
        if sample is not None:
            with open(GPU_SAMPLES, "a", encoding="utf-8") as samples:
                if samples.tell() > GPU_SAMPLES_MAX_BYTES:
                    return
                samples.write(json.dumps(sample) + "\n")
        time.sleep(interval)


def main() -> None:
    if sys.argv[1:2] == ["--sample-gpus"] and len(sys.argv) == 3:
        sample_gpus(int(sys.argv[2]))
        return
    if len(sys.argv) < 2:
        say("usage: launch.py SCRIPT [ARGUMENTS...]")
        sys.exit(2)
    script, arguments = sys.argv[1], sys.argv[2:]
    # When the job began here, for scripts (and benchmarks) that report their setup time.
    os.environ["NIGHTSHIFT_LAUNCHED_AT"] = f"{time.time():.3f}"
    python = sys.executable
    locked = os.path.isfile(LOCK_FILE)
    has_datasets = os.path.isfile(nightshift_data.MANIFEST)
    log = None
    if locked or has_datasets or os.path.isfile("requirements.txt"):
        log = Log(LOG)
        where = machine_attribute("Name") or platform.node()
        log.line(f"job started on {where}; its Python is {platform.python_version()} ({python})")
    if has_datasets:
        try:
            nightshift_data.deliver(machine_attribute, log.line, say)
        except nightshift_data.DeliveryError as exc:
            log.line(f"datasets: {exc}")
            say(f"the job's datasets could not be put in place: {exc}")
            sys.exit(4)
    if locked or os.path.isfile("requirements.txt"):
        uv = find_uv()
        if locked:
            record = {}
            if os.path.isfile(ENVIRONMENT_FILE):
                with open(ENVIRONMENT_FILE, encoding="utf-8") as stream:
                    record = json.load(stream)
            described = record.get("reference") or "from requirements.lock"
            check_python(log, record)
            keeper = nightshift_data.setting("keeper", machine_attribute)
            if os.environ.get("NIGHTSHIFT_ENV_CACHE") == "none":
                keeper = None  # the cache turned off for this job (find_cache says so)
            cache = None if keeper else find_cache(log)
            built = keeper and environment_from_keeper(log, keeper, described)
            if built:
                python = built
            elif cache is not None:
                try:
                    python = cached_environment(log, cache, python, uv, described)
                except InstallFailed as exc:
                    say(f"installing the environment failed (exit {exc}); see the install log")
                    sys.exit(exc.args[0])
            else:
                say("installing the environment into the job's sandbox")
                status = install(log, SANDBOX_VENV, python, uv, SANDBOX_UV_CACHE)
                if status:
                    say(f"installing the environment failed (exit {status}); see the install log")
                    sys.exit(status)
                python = os.path.join(SANDBOX_VENV, "bin", "python")
        else:
            log.line(
                "requirements.txt is not locked (it names sources the site allows): "
                "installing it into the job's sandbox, for this job only"
            )
            say("installing requirements.txt into a virtual environment (see the install log)")
            status = install(
                log, SANDBOX_VENV, python, uv, SANDBOX_UV_CACHE, unlocked="requirements.txt"
            )
            if status:
                say(f"installing requirements.txt failed (exit {status}); see the install log")
                sys.exit(status)
            python = os.path.join(SANDBOX_VENV, "bin", "python")
        log.line("starting the script")
        say("environment ready")
        # What was installed, for the job's reproducibility record.
        with open(os.path.join(HELPER_DIR, "pip-freeze.txt"), "wb") as frozen:
            if uv:
                command = [uv, "pip", "freeze", "--python", python]
            else:
                command = [python, "-m", "pip", "freeze", "--disable-pip-version-check"]
            subprocess.call(command, stdout=frozen, stderr=subprocess.DEVNULL)  # noqa: S603
    if os.environ.get("NIGHTSHIFT_LIVE"):
        start_live_services(python)
    start_gpu_sampler()
    sys.stdout.flush()
    os.execv(python, [python, script, *arguments])  # noqa: S606 - the job itself, as asked


if __name__ == "__main__":
    main()
