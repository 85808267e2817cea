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
import shutil
import socket
import subprocess
import sys
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


def tensorboard_dir() -> str:
    # The same folder as nightshift.tensorboard_dir(): inside the outputs, so that it is
    # kept, and a finished job's TensorBoard reads it.
    default = os.path.join(os.environ.get("NIGHTSHIFT_OUTPUT_DIR") or "outputs", "tensorboard")
    return os.environ.get("NIGHTSHIFT_TENSORBOARD_DIR") or default


def start_live_services(python: str) -> None:
    """The web services the job asked for, each on a free port of 127.0.0.1, which the
    portal's probe finds by the NIGHTSHIFT_LIVE_* variables in their environments."""
    services = [s for s in os.environ.get("NIGHTSHIFT_LIVE", "").split(",") if s]
    path = os.environ.get("NIGHTSHIFT_LIVE_PATH", "/live/job/")
    if "tensorboard" in services:
        folder = tensorboard_dir()
        os.makedirs(folder, exist_ok=True)
        candidates = [
            os.path.join(os.path.dirname(python), "tensorboard"),
            shutil.which("tensorboard"),
        ]
        program = next((c for c in candidates if c and os.access(c, os.X_OK)), None)
        if program is None:
            say(
                "TensorBoard is not installed in the job's environment: add tensorboard to "
                "it to see the job's event files live"
            )
        else:
            port = free_port()
            environment = dict(
                os.environ, NIGHTSHIFT_LIVE_SERVICE="tensorboard", NIGHTSHIFT_LIVE_PORT=str(port)
            )
            with open(os.path.join(HELPER_DIR, "tensorboard.log"), "ab") as log:
                # An argument list, never a shell. It stops with the job: HTCondor ends
                # every process the job started.
                subprocess.Popen(  # noqa: S603
                    [
                        program,
                        "--logdir",
                        folder,
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
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
            say(f"TensorBoard serves {folder} on 127.0.0.1:{port}")
    if "serve" in services:
        port = free_port()
        # The job's own endpoint: it binds 127.0.0.1:$NIGHTSHIFT_SERVE_PORT.
        os.environ.update(
            NIGHTSHIFT_SERVE_PORT=str(port),
            NIGHTSHIFT_LIVE_SERVICE="serve",
            NIGHTSHIFT_LIVE_PORT=str(port),
        )
    elif "notebook" in services:
        # A session: its script is nightshift.run_notebook(), JupyterLab on this port.
        port = free_port()
        os.environ.update(NIGHTSHIFT_LIVE_SERVICE="notebook", NIGHTSHIFT_LIVE_PORT=str(port))


# The job's GPUs, sampled with nvidia-smi beside the job, for workstations whose startd does
# not monitor GPUs (the portal prefers HTCondor's own figures where it has them).
GPU_SAMPLES = os.path.join(HELPER_DIR, "gpu-usage.jsonl")
GPU_SAMPLES_MAX_BYTES = 20 * 1024 * 1024
GPU_QUERY = "--query-gpu=index,uuid,utilization.gpu,memory.used"


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


def gpu_sample(smi: str, visible: list):
    """One line of samples: each of the job's devices, its busy share and memory in use."""
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
        if len(fields) != 4:
            continue
        index, uuid, utilization, memory = fields
        # CUDA_VISIBLE_DEVICES names devices by index or by (the start of) their UUID.
        if not any(v == index or uuid.startswith(v) for v in visible):
            continue
        try:
            devices.append(
                {"uuid": uuid, "utilization": float(utilization) / 100, "memory_mb": float(memory)}
            )
        except ValueError:
            continue
    return {"time": round(time.time(), 3), "devices": devices} if devices else None


def sample_gpus(job_pid: int) -> None:
    smi, visible = find_nvidia_smi(), visible_gpus()
    # The workstation's own choice (the execute-node kit's NIGHTSHIFT_GPU_SAMPLE_SECONDS).
    try:
        interval = max(float(machine_attribute("NightshiftGpuSampleSeconds") or 10), 1.0)
    except (TypeError, ValueError):
        interval = 10.0
    time.sleep(min(interval, 2.0))
    while smi:
        try:
            os.kill(job_pid, 0)
        except OSError:
            return  # the job has ended
        sample = gpu_sample(smi, visible)
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
