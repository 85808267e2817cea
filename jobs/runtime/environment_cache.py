"""Installing a job's environment, and the workstation's shared environment cache.

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

Where the workstation runs a cache keeper (cache_keeper.py, the machine attribute
NightshiftCacheKeeper), jobs cannot write the cache: the keeper builds each environment as
an account no job runs as, and the job only reads it.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time

import cache_keeper
import nightshift_data

HELPER_DIR = os.path.dirname(os.path.abspath(__file__))
LOCK_FILE = os.path.join(HELPER_DIR, "requirements.lock")
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


def installer_environment(uv_cache=None, index=None) -> dict:
    environment = dict(os.environ)
    environment.pop("PYTHONPATH", None)  # the helper is the job's, not the installer's
    environment["UV_PYTHON_DOWNLOADS"] = "never"  # the workstation's Python, or nothing
    if uv_cache:
        environment["UV_CACHE_DIR"] = uv_cache
    if index is None:
        index = os.environ.get("NIGHTSHIFT_PACKAGE_INDEX_URL")
    if index:
        environment["UV_INDEX_URL"] = index
        environment["PIP_INDEX_URL"] = index
    return environment


class InstallFailed(Exception):
    """An install that failed; its exit status."""


def install(
    log: Log,
    target: str,
    python: str,
    uv,
    uv_cache,
    *,
    unlocked: str = "",
    lock_file: str = LOCK_FILE,
    wheels_only: bool = False,
    index=None,
) -> int:
    """A virtual environment at `target` with the lock (or, unlocked, requirements.txt).
    `wheels_only` builds nothing from source: no package's own code runs while installing."""
    environment = installer_environment(uv_cache, index)
    if uv:
        status = log.run([uv, "venv", "--quiet", "--python", python, target], environment)
        if status:
            return status
        venv_python = os.path.join(target, "bin", "python")
        if unlocked:
            return log.run(
                [uv, "pip", "install", "--python", venv_python, "-r", unlocked], environment
            )
        sync = [uv, "pip", "sync", "--python", venv_python, "--require-hashes", lock_file]
        if wheels_only:
            sync.append("--no-build")
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
    arguments = ["-r", unlocked] if unlocked else ["--require-hashes", "--no-deps", "-r", lock_file]
    if wheels_only:
        arguments += ["--only-binary", ":all:"]
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


def python_identity() -> str:
    """This Python, as an environment's key names it (the cache keeper asks the job's)."""
    return f"{sys.executable}\n{platform.python_version()}\n{platform.machine()}\n"


def environment_key(lock: bytes, identity: str = "") -> str:
    """The lock and the Python it is installed for: another Python is another environment."""
    return hashlib.sha256((identity or python_identity()).encode() + lock).hexdigest()[:32]


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


def cached_environment(
    log: Log,
    cache: str,
    python: str,
    uv,
    described: str,
    *,
    lock_file: str = LOCK_FILE,
    identity: str = "",
    keeper: bool = False,
    index=None,
    held: list = HELD,
) -> str:
    """The environment's Python, built here first if no job has; InstallFailed if the build
    fails. Its lock is kept in `held`: a job's until it exits, or the cache keeper's for as
    long as the job that asked stays connected. The keeper builds from wheels only."""
    with open(lock_file, "rb") as stream:
        key = environment_key(stream.read(), identity)
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
            uv_cache = os.path.join(cache, "uv")
            status = install(
                log,
                folder,
                python,
                uv,
                uv_cache,
                lock_file=lock_file,
                wheels_only=keeper,
                index=index,
            )
            if status:
                remove_environment(folder)
                log.line(f"installing the environment failed (exit {status})")
                handle.close()
                raise InstallFailed(status)
            with open(os.path.join(folder, "nightshift-environment.json"), "w") as manifest:
                # No name: in the keeper's cache the jobs of every user read this.
                json.dump({"key": key, "python": python, "built": time.time()}, manifest)
            with open(os.path.join(folder, COMPLETE + ".tmp"), "w") as marker:
                marker.write(f"{time.time()}\n")
            os.replace(os.path.join(folder, COMPLETE + ".tmp"), os.path.join(folder, COMPLETE))
            log.line(f"environment built in {time.monotonic() - started:.1f} s")
        fcntl.flock(handle, fcntl.LOCK_SH)  # from building to using: others may use it now
    with open(os.path.join(folder, LAST_USED), "a"):
        os.utime(os.path.join(folder, LAST_USED))
    # Held by the job itself (the descriptor survives exec) until it exits.
    os.set_inheritable(handle.fileno(), True)
    held.append(handle)
    make_room(log, cache, keep=key)
    return os.path.join(folder, "bin", "python")


def environment_from_keeper(log: Log, keeper: str, described: str):
    """The environment's Python from the workstation's cache keeper, which builds it as an
    account no job runs as, so that no job can change what a later one runs. None (with
    the reason logged) where it cannot: the job then installs into its own sandbox."""
    with open(LOCK_FILE, encoding="utf-8") as stream:
        lock = stream.read()
    request = {
        "op": "environment",
        "lock": lock,
        "python": sys.executable,
        "described": described,
        "index": os.environ.get("NIGHTSHIFT_PACKAGE_INDEX_URL", ""),
    }
    say("getting the environment from this workstation's cache")
    try:
        answer = cache_keeper.ask(keeper, request, log.line, HELD)
    except cache_keeper.KeeperRefused as exc:
        log.line(f"{exc}: installing into the job's sandbox, for this job only")
        return None
    return answer["python"]
