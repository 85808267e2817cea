#!/usr/bin/env python3
"""The workstation's cache keeper, the daemon: see cache_keeper.py for what it is for.

    cache_keeper_daemon.py --socket PATH --env-cache DIR --data-cache DIR --workstation NAME
        [--user nightshift-cache] [--uv PATH] [--env-cache-gb N] [--data-cache-gb N]
        [--verify-hours N] [--log FILE]

The execute-node kit runs it under condor_master, which keeps it running. Started as root,
it makes its socket (anyone may connect: jobs run as many accounts), gives the caches to
--user and becomes that account before it reads a request. Each connection is served in a
thread of its own; builds of one environment or fetches of one dataset wait for each other
on the entry's lock, as jobs did when they built them themselves.

Standard library only: it runs with whatever Python the workstation has.
"""

import argparse
import contextlib
import fcntl
import grp
import json
import os
import pwd
import re
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cache_keeper  # noqa: E402 - beside this file, found through the path above
import environment_cache  # noqa: E402
import nightshift_data  # noqa: E402

SETTINGS = {}
IDENTITIES = {}
URL = re.compile(r"https?://[^\s]{1,2000}")


def note(message):
    print(time.strftime("%Y-%m-%d %H:%M:%S"), message, file=sys.stderr, flush=True)


class JobLog(environment_cache.Log):
    """The install log's lines, sent to the job as they come, uv's output line by line: the
    job's page shows a long install as it goes."""

    def __init__(self, send):
        self.send = send

    def line(self, message):
        self.send({"log": message})

    def run(self, command, environment=None):
        self.send({"log": "$ " + " ".join(command)})
        # An argument list, never a shell: nothing here is parsed by a shell.
        process = subprocess.Popen(  # noqa: S603
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environment
        )
        for output in process.stdout:
            self.send({"log": output.decode("utf-8", "replace").rstrip()})
        return process.wait()


def text(request, key, limit):
    value = request.get(key, "")
    if not isinstance(value, str) or len(value) > limit or "\x00" in value:
        raise cache_keeper.KeeperRefused(f"{key} is not text of at most {limit} characters")
    return value


# A lock as the portal writes it (uv pip compile --generate-hashes): pinned names with
# their hashes, an environment marker at most, comments. Nothing else reaches uv: no options
# (another index, links), no URLs or paths to install from.
PINNED = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]*\])?==[A-Za-z0-9.+!_-]+"
    r"(\s*;(?P<marker>[\w\s.<>=!~\"'(),*-]+?))?(\s+--hash=sha256:[0-9a-f]{64})+"
)


def pinned_only(lock):
    """Whether every requirement in `lock` is a pinned package with its hashes."""
    for line in lock.replace("\\\n", " ").splitlines():
        line = line.partition("#")[0].strip()
        if not line:
            continue
        match = PINNED.fullmatch(line)
        if match is None or "--" in (match.group("marker") or ""):
            return False
    return True


def python_identity(python):
    """A Python as environment_cache.python_identity() names it: path, version, machine."""
    if python not in IDENTITIES:
        code = "import platform; print(platform.python_version()); print(platform.machine())"
        ran = subprocess.run(  # noqa: S603 - a root-owned Python, an argument list
            [python, "-I", "-c", code], capture_output=True, text=True, timeout=60
        )
        if ran.returncode:
            raise cache_keeper.KeeperRefused(f"{python} does not run here")
        IDENTITIES[python] = f"{python}\n{ran.stdout}"
    return IDENTITIES[python]


def environment(request, send, held):
    lock = text(request, "lock", cache_keeper.MAX_REQUEST_BYTES)
    asked = text(request, "python", 4096)
    python = cache_keeper.trusted_python(asked)
    if python is None:
        raise cache_keeper.KeeperRefused(
            f"the job's Python {asked} is not one the keeper may run (root must own it, and "
            "nobody else may change it or a folder above it)"
        )
    if not pinned_only(lock):
        raise cache_keeper.KeeperRefused(
            "the lock holds more than pinned packages with their hashes (an option, a URL or "
            "a path to install from), which the shared cache does not install"
        )
    index = text(request, "index", 2000)
    if index and not URL.fullmatch(index):
        raise cache_keeper.KeeperRefused("the package index is not an http(s) URL")
    described = text(request, "described", 300)
    cache = SETTINGS["env_cache"]
    # The resolved path, never the job's: a link the job could point elsewhere after the check.
    identity = python_identity(python)
    log = JobLog(send)
    with tempfile.NamedTemporaryFile("w", dir=SETTINGS["work"], suffix=".lock") as locked:
        locked.write(lock)
        locked.flush()
        key = environment_cache.environment_key(lock.encode(), identity)
        try:
            built = environment_cache.cached_environment(
                log,
                cache,
                python,
                SETTINGS["uv"],
                described,
                lock_file=locked.name,
                identity=identity,
                keeper=True,
                index=index or None,
                held=held,
            )
        except environment_cache.InstallFailed as exc:
            raise cache_keeper.KeeperRefused(
                f"installing the environment failed (exit {exc}); the shared cache installs "
                "wheels only, and one of its packages may need building from source"
            ) from None
    folder = os.path.join(cache, "envs", key)
    return {
        "python": built,
        "lock": os.path.join(cache, "locks", f"{key}.lock"),
        "complete": os.path.join(folder, environment_cache.COMPLETE),
    }


def dataset(request, send, held):
    wanted = request.get("dataset")
    if not isinstance(wanted, dict):
        raise cache_keeper.KeeperRefused("no dataset")
    sha = text(wanted, "sha256", 64)
    if not cache_keeper.SHA256.fullmatch(sha) or wanted.get("kind") != "archive":
        raise cache_keeper.KeeperRefused("the dataset is not a stored version")
    if not URL.fullmatch(text(wanted, "url", 2000)):
        raise cache_keeper.KeeperRefused("the dataset's URL is not an http(s) URL")
    text(wanted, "reference", 500)
    if not isinstance(wanted.get("size_bytes"), int):
        raise cache_keeper.KeeperRefused("the dataset has no size")
    credential = text(request, "credential", 4096)
    if not credential or "\n" in credential or "\r" in credential:
        raise cache_keeper.KeeperRefused("no credential to fetch it with")
    cache = SETTINGS["data_cache"]

    def log(message):
        send({"log": message})

    # The portal records which slot fetched (the job's, as its own fetches said), where it
    # is one of this workstation's.
    slot = text(request, "slot", 300)
    here = nightshift_data.WORKSTATION[0]
    if slot.split("@")[1:2] != [here] or not slot.isprintable():
        slot = here
    started = time.monotonic()
    target, received = nightshift_data.cached(
        cache, wanted, credential, log, SETTINGS["verify_hours"], held=held, workstation=slot
    )
    nightshift_data.make_room(cache, {sha}, SETTINGS["data_cache_gb"], log)
    record = {
        "sha256": sha,
        "reference": wanted["reference"],
        "how": "fetched" if received else "reused",
        "bytes_received": received,
        "seconds": round(time.monotonic() - started, 3),
        "workstation": slot,
        "job": text(request, "job", 100),
        "time": time.time(),
        "by": "cache keeper",
    }
    # Which jobs used which dataset is nobody else's business: the keeper's alone.
    deliveries = os.open(
        os.path.join(cache, "deliveries.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600
    )
    with open(deliveries, "a", encoding="utf-8") as stream:
        stream.write(json.dumps(record) + "\n")
    entry = os.path.join(cache, "objects", sha)
    return {
        "target": target,
        "received": received,
        "lock": os.path.join(cache, "locks", f"{sha}.lock"),
        "complete": os.path.join(entry, nightshift_data.COMPLETE),
    }


OPERATIONS = {"environment": environment, "dataset": dataset}

# How often a hold taken over after a restart checks whether its job is still there.
HOLDER_CHECK_S = 2.0


def process_start(pid):
    """When process `pid` started (clock ticks since boot), or None where there is none: with
    the pid, it names one process, not a later one that was given the same number."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def holds_folder():
    return os.path.join(SETTINGS["env_cache"], "locks", "holds")


def hold_record(pid, held):
    """A note of what a job holds, in the keeper's own folder: if the keeper dies (a crash;
    condor_master starts it again), the next one holds the same entries for as long as that
    job lives, so that making room never removes what a running job uses. Returns its path."""
    record = os.path.join(holds_folder(), f"{uuid.uuid4().hex}.json")
    note_of = {"pid": pid, "start": process_start(pid), "locks": [h.name for h in held]}
    with open(record + ".part", "w", encoding="utf-8") as out:
        json.dump(note_of, out)
    os.replace(record + ".part", record)
    return record


def holds_take_over():
    """The holds a keeper before this one noted, for jobs still running: each entry's lock is
    held again, and let go (with its note) once the job has gone."""
    taken = []
    for name in sorted(os.listdir(holds_folder())):
        record = os.path.join(holds_folder(), name)
        try:
            with open(record, encoding="utf-8") as noted:
                hold = json.load(noted)
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                os.remove(record)
            continue
        if hold.get("start") is None or process_start(hold.get("pid")) != hold["start"]:
            os.remove(record)
            continue
        handles = []
        for lock in hold.get("locks", []):
            with contextlib.suppress(OSError):
                handle = open(lock, "a")  # noqa: SIM115 - held until the job goes
                fcntl.flock(handle, fcntl.LOCK_SH)
                handles.append(handle)
        note(f"holding {len(handles)} entries again for pid {hold['pid']}, still running")
        taken.append((record, hold, handles))
    if taken:
        threading.Thread(target=holds_let_go, args=(taken,), daemon=True).start()
    return len(taken)


def holds_let_go(taken):
    while taken:
        time.sleep(HOLDER_CHECK_S)
        for record, hold, handles in list(taken):
            if process_start(hold["pid"]) != hold["start"]:
                for handle in handles:
                    handle.close()
                with contextlib.suppress(OSError):
                    os.remove(record)
                note(f"pid {hold['pid']} has gone: its entries are no longer held")
                taken.remove((record, hold, handles))


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        gone = []

        def send(answer):
            # A job evicted while its environment builds goes away; the build goes on, for
            # the next job that asks.
            if not gone:
                try:
                    self.wfile.write(json.dumps(answer).encode() + b"\n")
                    self.wfile.flush()
                except OSError:
                    gone.append(True)

        peer = struct.unpack(
            "3i", self.request.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        )
        line = self.rfile.readline(cache_keeper.MAX_REQUEST_BYTES + 1)
        try:
            try:
                request = json.loads(line)
            except ValueError:
                raise cache_keeper.KeeperRefused("the request is not one line of JSON") from None
            if not isinstance(request, dict) or request.get("op") not in OPERATIONS:
                raise cache_keeper.KeeperRefused("the keeper builds environments and datasets")
            note(f"uid {peer[1]} (pid {peer[0]}) asks for {request['op']}")
            make_folders()
            held, record = [], None
            try:
                answer = OPERATIONS[request["op"]](request, send, held)
                record = hold_record(peer[0], held)
                send({"ok": answer})
                # The entry stays held (never removed to make room) until the job that
                # asked closes the connection: when it exits, however it ends.
                while not gone and self.request.recv(4096):
                    pass
            finally:
                for handle in held:
                    handle.close()
                if record:
                    with contextlib.suppress(OSError):
                        os.remove(record)
        except cache_keeper.KeeperRefused as exc:
            note(f"uid {peer[1]}: refused: {exc}")
            send({"error": str(exc)})
        except nightshift_data.DeliveryError as exc:
            send({"error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - one request's failure, not the keeper's
            note(f"uid {peer[1]}: {''.join(traceback.format_exception(exc))}")
            send({"error": f"the keeper failed ({type(exc).__name__})"})


class Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


def own(folder, account):
    """The cache's folder made, and all of it given to the keeper's account: what a job's
    account wrote before the keeper came (kits that let jobs write) is the keeper's now."""
    os.makedirs(folder, exist_ok=True)
    for root, folders, files in os.walk(folder):
        for name in [root] + [os.path.join(root, entry) for entry in folders + files]:
            status = os.lstat(name)
            if (status.st_uid, status.st_gid) != (account.pw_uid, account.pw_gid):
                os.lchown(name, account.pw_uid, account.pw_gid)
            if status.st_mode & 0o022 and not os.path.islink(name):
                os.chmod(name, status.st_mode & ~0o022)


def network_settings():
    """The environment HTCondor gives this workstation's jobs (STARTER_JOB_ENVIRONMENT: a
    campus proxy, its CA bundle, a package mirror): the keeper installs and fetches for the
    jobs, so it reaches the network as they would."""
    try:
        ran = subprocess.run(
            ["condor_config_val", "STARTER_JOB_ENVIRONMENT"],  # noqa: S607 - HTCondor's tool
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError:
        return {}
    value = ran.stdout.strip().strip('"') if ran.returncode == 0 else ""
    pairs = (item.partition("=") for item in value.split())
    return {name: setting for name, equals, setting in pairs if equals and name}


# Jobs read an entry they were given, by its path; they cannot list which entries the cache
# holds (whose private datasets they would be), and nothing else is theirs to read.
FOLDER_MODES = {
    ("env_cache", "envs"): 0o711,
    ("env_cache", "locks"): 0o700,
    ("env_cache", "locks/holds"): 0o700,
    ("env_cache", "uv"): 0o700,
    ("env_cache", "requests"): 0o700,
    ("data_cache", "objects"): 0o711,
    ("data_cache", "locks"): 0o700,
}


def make_folders():
    """The caches' folders, with their modes (made again where someone emptied a cache while
    the keeper ran)."""
    for (cache, part), mode in FOLDER_MODES.items():
        folder = os.path.join(SETTINGS[cache], part)
        os.makedirs(folder, mode=mode, exist_ok=True)
        os.chmod(folder, mode)


def main(arguments=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--env-cache", required=True)
    parser.add_argument("--data-cache", required=True)
    parser.add_argument("--workstation", default=socket.gethostname())
    parser.add_argument("--user", default="nightshift-cache")
    parser.add_argument("--log", default="", help="append what it does here (else stderr)")
    parser.add_argument("--uv", default="")
    parser.add_argument("--env-cache-gb", type=float, default=environment_cache.DEFAULT_CACHE_GB)
    parser.add_argument("--data-cache-gb", type=float, default=nightshift_data.DEFAULT_CACHE_GB)
    parser.add_argument("--verify-hours", type=float, default=nightshift_data.DEFAULT_VERIFY_HOURS)
    options = parser.parse_args(arguments)
    os.umask(0o022)
    # condor_master sends every daemon SIGHUP on condor_reconfig; this one has nothing to
    # read again, and must not die (jobs starting meanwhile would install for themselves).
    signal.signal(signal.SIGHUP, lambda number, frame: None)
    if options.log:
        sys.stderr = open(options.log, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
    SETTINGS.update(
        env_cache=options.env_cache,
        data_cache=options.data_cache,
        data_cache_gb=options.data_cache_gb,
        verify_hours=options.verify_hours,
        # The kit's uv where it installed one; else any on the path; else pip.
        uv=options.uv if os.access(options.uv, os.X_OK) else environment_cache.find_uv(),
        work=os.path.join(options.env_cache, "requests"),
    )
    os.environ.update(network_settings())
    os.environ["NIGHTSHIFT_ENV_CACHE_GB"] = str(options.env_cache_gb)
    nightshift_data.WORKSTATION[0] = options.workstation
    with contextlib.suppress(FileNotFoundError):
        os.remove(options.socket)
    server = Server(options.socket, Handler)
    os.chmod(options.socket, 0o666)  # noqa: S103 - every job account connects; nothing else
    if os.getuid() == 0:
        account = pwd.getpwnam(options.user)
        for folder in (options.env_cache, options.data_cache):
            own(folder, account)
        os.setgroups([])
        os.setgid(account.pw_gid)
        os.setuid(account.pw_uid)
    make_folders()
    holds_take_over()
    who = grp.getgrgid(os.getgid()).gr_name
    note(f"keeping {options.env_cache} and {options.data_cache} as uid {os.getuid()} ({who})")
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
