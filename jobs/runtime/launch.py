"""Nightshift's launcher: put the job's packages in place, then run its script.

    python3 .nightshift/launch.py train.py --epochs 10

With a lock (.nightshift/requirements.lock, exact versions and hashes the portal resolved),
the environment is installed once per workstation into its shared environment cache and
reused by every later job with the same lock and Python:

    CACHE/envs/KEY/          the virtual environment; complete once it holds COMPLETE
    CACHE/locks/KEY.lock     flock: exclusive while building, shared while a job uses it
    CACHE/uv/                uv's package cache (downloads, unpacked wheels)

KEY is the SHA-256 of the lock and this workstation's Python. Jobs that start together wait
for the one that builds; a build that was killed leaves no COMPLETE, and the next job
removes what it left before building again. A job keeps a shared lock on its environment
while it runs, so that making room in the cache never removes an environment in use.

The cache is the execute-node kit's: NIGHTSHIFT_ENV_CACHE, or the workstation's
NightshiftEnvCache attribute (the machine ad HTCondor puts beside the job). Without one the
job installs into its own sandbox, as jobs did before, and the install log says why. A job
with a requirements.txt and no lock (the site let it name other sources) installs that
with pip into its sandbox. Everything that is installed is logged to .nightshift/install.log,
which the job page shows. No shell ever runs: only argument lists.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time

import nightshift_data

HELPER_DIR = os.path.dirname(os.path.abspath(__file__))
LOG = os.path.join(HELPER_DIR, "install.log")
LOCK_FILE = os.path.join(HELPER_DIR, "requirements.lock")
ENVIRONMENT_FILE = os.path.join(HELPER_DIR, "environment.json")
# Outside the helper folder, which travels back to the portal: a sandbox install must not.
SANDBOX_VENV = ".nightshift-venv"
SANDBOX_UV_CACHE = ".nightshift-uv-cache"
COMPLETE = "COMPLETE"
LAST_USED = "LAST_USED"
DEFAULT_CACHE_GB = 50.0
# The lock on the environment in use: kept open (not collected) so that the job inherits it.
HELD = []


def say(message: str) -> None:
    print(f"nightshift: {message}", file=sys.stderr, flush=True)


class Log:
    def __init__(self, path: str) -> None:
        self.stream = open(path, "ab")  # noqa: SIM115 - open for the launcher's lifetime

    def line(self, message: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        self.stream.write(f"[{stamp}] {message}\n".encode())
        self.stream.flush()

    def run(self, command: list, environment: dict | None = None) -> int:
        self.stream.write(("$ " + " ".join(command) + "\n").encode())
        self.stream.flush()
        # An argument list, never a shell: nothing here is parsed by a shell.
        return subprocess.call(  # noqa: S603
            command, stdout=self.stream, stderr=subprocess.STDOUT, env=environment
        )


machine_attribute = nightshift_data.machine_attribute


def find_uv():
    if os.environ.get("NIGHTSHIFT_UV") == "none":  # pip only (a benchmark's "as before")
        return None
    candidates = [
        os.environ.get("NIGHTSHIFT_UV"),
        machine_attribute("NightshiftUv"),
        shutil.which("uv"),
    ]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def installer_environment(uv_cache=None) -> dict:
    environment = dict(os.environ)
    environment.pop("PYTHONPATH", None)  # the helper is the job's, not the installer's
    environment["UV_PYTHON_DOWNLOADS"] = "never"  # the workstation's Python, or nothing
    if uv_cache:
        environment["UV_CACHE_DIR"] = uv_cache
    index = os.environ.get("NIGHTSHIFT_PACKAGE_INDEX_URL")
    if index:
        environment["UV_INDEX_URL"] = index
        environment["PIP_INDEX_URL"] = index
    return environment


def install(log: Log, target: str, python: str, uv, uv_cache, *, unlocked: str = "") -> int:
    """A virtual environment at `target` with the lock (or, unlocked, requirements.txt)."""
    environment = installer_environment(uv_cache)
    if uv:
        status = log.run([uv, "venv", "--quiet", "--python", python, target], environment)
        if status:
            return status
        venv_python = os.path.join(target, "bin", "python")
        if unlocked:
            return log.run(
                [uv, "pip", "install", "--python", venv_python, "-r", unlocked], environment
            )
        sync = [uv, "pip", "sync", "--python", venv_python, "--require-hashes", LOCK_FILE]
        status = log.run(sync, environment)
        if status:
            # The lock was resolved against the index a while ago; a mirror, a proxy or the
            # index's own CDN may not list a release it names yet ("No solution found"),
            # and uv's cached index pages may be older still. Once more, later, afresh.
            pause = retry_pause_s()
            log.line(
                f"the install failed (exit {status}): trying once more in {pause:g} s, "
                "with fresh index pages, in case the index had not caught up with the lock"
            )
            time.sleep(pause)
            status = log.run([*sync, "--refresh"], environment)
        return status
    status = log.run([python, "-m", "venv", target], environment)
    if status:
        return status
    venv_python = os.path.join(target, "bin", "python")
    arguments = ["-r", unlocked] if unlocked else ["--require-hashes", "--no-deps", "-r", LOCK_FILE]
    return log.run(
        [
            venv_python,
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            *arguments,
        ],
        environment,
    )


def retry_pause_s() -> float:
    """How long a failed install waits before its one retry (NIGHTSHIFT_INSTALL_RETRY_S)."""
    try:
        return min(max(float(os.environ.get("NIGHTSHIFT_INSTALL_RETRY_S", "20")), 0.0), 300.0)
    except ValueError:
        return 20.0


def environment_key(lock: bytes) -> str:
    """The lock and the Python it is installed for: another Python is another environment."""
    identity = f"{sys.executable}\n{platform.python_version()}\n{platform.machine()}\n"
    return hashlib.sha256(identity.encode() + lock).hexdigest()[:32]


def find_cache(log: Log):
    """The shared environment cache, or None with the reason logged."""
    folder = os.environ.get("NIGHTSHIFT_ENV_CACHE") or machine_attribute("NightshiftEnvCache")
    if folder == "none":
        log.line(
            "the shared environment cache is turned off for this job: installing into "
            "the job's sandbox, for this job only"
        )
        return None
    if not folder:
        log.line(
            "this workstation has no shared environment cache (the execute-node kit sets "
            "NightshiftEnvCache): installing into the job's sandbox, for this job only"
        )
        return None
    try:
        for part in ("envs", "locks", "uv"):
            os.makedirs(os.path.join(folder, part), exist_ok=True)
        probe = os.path.join(folder, "locks", f".probe-{os.getpid()}")
        open(probe, "w").close()  # noqa: SIM115
        os.remove(probe)
    except OSError as exc:
        log.line(
            f"the shared environment cache {folder} cannot be used ({exc.strerror}): "
            "installing into the job's sandbox, for this job only"
        )
        return None
    return folder


def make_room(log: Log, cache: str, keep: str) -> None:
    """Past the cache's size cap, remove the environments used longest ago that no job is
    using (a job holds its environment's lock shared; removal needs it exclusive)."""
    cap_gb = os.environ.get("NIGHTSHIFT_ENV_CACHE_GB") or machine_attribute("NightshiftEnvCacheGb")
    try:
        cap = float(cap_gb or DEFAULT_CACHE_GB) * 1024**3
    except ValueError:
        cap = DEFAULT_CACHE_GB * 1024**3
    envs = os.path.join(cache, "envs")
    size = nightshift_data.tree_size(envs)
    if size <= cap:
        return

    def last_used(key: str) -> float:
        try:
            return os.stat(os.path.join(envs, key, LAST_USED)).st_mtime
        except OSError:
            return 0.0

    for key in sorted((k for k in os.listdir(envs) if k != keep), key=last_used):
        if size <= cap:
            break
        with open(os.path.join(cache, "locks", f"{key}.lock"), "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # in use
            freed = nightshift_data.tree_size(os.path.join(envs, key))
            remove_environment(os.path.join(envs, key))
            size -= freed
            log.line(
                f"removed environment {key} from the cache ({freed / 1e6:.0f} MB), "
                "to stay under its size cap"
            )


def remove_environment(folder: str) -> None:
    # COMPLETE goes first, so that a removal cut short is never taken for complete.
    with contextlib.suppress(OSError):
        os.remove(os.path.join(folder, COMPLETE))
    shutil.rmtree(folder, ignore_errors=True)


def cached_environment(log: Log, cache: str, python: str, uv, described: str) -> str:
    """The environment's Python, built here first if no job has; exits when the build fails."""
    with open(LOCK_FILE, "rb") as stream:
        key = environment_key(stream.read())
    folder = os.path.join(cache, "envs", key)
    handle = open(os.path.join(cache, "locks", f"{key}.lock"), "a")  # noqa: SIM115 - held until exit
    fcntl.flock(handle, fcntl.LOCK_SH)
    if os.path.isfile(os.path.join(folder, COMPLETE)):
        log.line(
            f"reusing environment {described} (key {key}) from this workstation's cache: "
            "nothing to install"
        )
    else:
        fcntl.flock(handle, fcntl.LOCK_UN)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            log.line(f"another job is building environment {described} (key {key}) here; waiting")
            say("waiting for another job that is installing the same environment")
            fcntl.flock(handle, fcntl.LOCK_EX)
        if os.path.isfile(os.path.join(folder, COMPLETE)):
            log.line(
                f"reusing environment {described} (key {key}), which another job has just "
                "built in this workstation's cache: nothing to install"
            )
        else:
            if os.path.exists(folder):
                log.line(
                    f"removing an unfinished build of environment {key} (a job building it "
                    "was stopped)"
                )
                remove_environment(folder)
            log.line(
                f"building environment {described} (key {key}) in this workstation's "
                "cache, once for every later job"
            )
            say("installing the environment into this workstation's cache (once)")
            started = time.monotonic()
            status = install(log, folder, python, uv, os.path.join(cache, "uv"))
            if status:
                remove_environment(folder)
                log.line(f"installing the environment failed (exit {status})")
                say(f"installing the environment failed (exit {status}); see the install log")
                sys.exit(status)
            with open(os.path.join(folder, "nightshift-environment.json"), "w") as manifest:
                json.dump(
                    {"environment": described, "key": key, "python": python, "built": time.time()},
                    manifest,
                )
            with open(os.path.join(folder, COMPLETE + ".tmp"), "w") as marker:
                marker.write(f"{time.time()}\n")
            os.replace(os.path.join(folder, COMPLETE + ".tmp"), os.path.join(folder, COMPLETE))
            log.line(f"environment built in {time.monotonic() - started:.1f} s")
        fcntl.flock(handle, fcntl.LOCK_SH)  # from building to using: others may use it now
    with open(os.path.join(folder, LAST_USED), "a"):
        os.utime(os.path.join(folder, LAST_USED))
    # Held by the job itself (the descriptor survives exec) until it exits.
    os.set_inheritable(handle.fileno(), True)
    HELD.append(handle)
    make_room(log, cache, keep=key)
    return os.path.join(folder, "bin", "python")


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
            cache = find_cache(log)
            if cache is not None:
                python = cached_environment(log, cache, python, uv, described)
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
