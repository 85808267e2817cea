"""More than one portal host, played on one machine: two gunicorn processes behind the
production nginx site (its upstream round robin over both), two Celery workers, and one
shared folder (NIGHTSHIFT_SHARED_DIR). Each process has a NIGHTSHIFT_VAR_DIR of its own, as
if it ran on its own host, so that whatever the portal keeps outside PostgreSQL is found
only if it is in the shared folder.

A resumable upload's PATCHes alternate between the two web processes; one of them is
killed with a chunk half received, and the upload resumes through the other; the file is
imported by whichever worker takes it, and a job fetches the dataset from the web process
started again with an empty folder, which had no part in the import. A worker killed while
it packs an import leaves no archive a reader could take, and the other worker finishes the
import once beat's recovery finds it stalled."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import redis
from tusclient import client as tus

from accounts import services as account_services
from datasets.models import DatasetImport
from jobs.models import Job
from tests.datasets.test_delivery import delivered, launch
from tests.helpers import free_port, wait_for
from tests.operations.nginx_site import nginx_site
from tests.pipeline import REPO, database_url

PRODUCTION_GUNICORN = REPO / "deploy" / "production" / "gunicorn.conf.py"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

# The processes' own broker database, emptied first: no other test's message reaches them.
REDIS_URL = "redis://127.0.0.1:6379/9"
PER_HOST = ("NIGHTSHIFT_VAR_DIR", "NIGHTSHIFT_JOBS_DIR", "NIGHTSHIFT_DATASETS_DIR")
CHUNK = 256 * 1024


class Process:
    """One of the portal's processes, on its own "host" (its own var folder)."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], logs: Path) -> None:
        self.name, self.command, self.env, self.logs = name, command, env, logs
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self, var_dir: Path) -> None:
        self.starts += 1
        var_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.logs / f"{self.name}-{self.starts}.log", "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            self.command,
            cwd=REPO,
            env=self.env | {"NIGHTSHIFT_VAR_DIR": str(var_dir)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.kill()

    def log(self) -> str:
        return "\n".join(
            path.read_text(errors="replace")
            for path in sorted(self.logs.glob(f"{self.name}-[0-9]*.log"))
        )


class Campus:
    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path
        self.shared = tmp_path / "shared"
        self.shared.mkdir()
        self.ports = {"web-a": free_port(), "web-b": free_port()}
        env = {key: value for key, value in os.environ.items() if key not in PER_HOST}
        self.env = env | {
            "DATABASE_URL": database_url(),
            "REDIS_URL": REDIS_URL,
            "NIGHTSHIFT_SHARED_DIR": str(self.shared),
            "NIGHTSHIFT_BRIDGE": "fake",
            "NIGHTSHIFT_TRUSTED_PROXY_COUNT": "1",
            # Where workstations fetch datasets: web-a, which the test restarts empty.
            "NIGHTSHIFT_DATASET_DELIVERY_URL": f"http://127.0.0.1:{self.ports['web-a']}",
            "PYTHONUNBUFFERED": "1",
        }
        bin_dir = Path(sys.executable).parent
        # Production's gunicorn settings, which must suit the nginx in front (its timeouts,
        # and keeping idle connections open longer than nginx does: with gunicorn's own 2 s,
        # nginx answered one of this upload's chunks with a 502).
        self.webs = {
            name: Process(
                name,
                [str(bin_dir / "gunicorn"), "portal.wsgi", "--config", str(PRODUCTION_GUNICORN)],
                self.env
                | {
                    "NIGHTSHIFT_WEB_BIND": f"127.0.0.1:{port}",
                    "NIGHTSHIFT_WEB_WORKERS": "1",
                    "NIGHTSHIFT_WEB_THREADS": "4",
                },
                tmp_path,
            )
            for name, port in self.ports.items()
        }
        self.workers = {
            name: Process(
                name,
                [
                    str(bin_dir / "celery"),
                    "-A",
                    "portal",
                    "worker",
                    "--pool",
                    "solo",
                    "--loglevel",
                    "INFO",
                    "--hostname",
                    f"{name}@%h",
                    "--without-mingle",
                    "--without-gossip",
                ],
                self.env,
                tmp_path,
            )
            for name in ("worker-a", "worker-b")
        }

    def start_web(self, name: str) -> None:
        self.webs[name].start(self.root / f"{name}-var-{self.webs[name].starts + 1}")
        url = f"http://127.0.0.1:{self.ports[name]}/accounts/login/"

        def answers() -> bool:
            try:
                return httpx.get(url).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(answers, timeout=90, what=f"gunicorn {name}")

    def served_by(self, nginx, method: str) -> list[str]:
        """Which web process answered each such request through nginx, in order."""
        by_port = {f"127.0.0.1:{port}": name for name, port in self.ports.items()}
        served = []
        for line in (nginx.run / "access.log").read_text().splitlines():
            verb, _, status, upstreams = line.split(" ", 3)
            if verb == method and status.startswith("2"):
                served.append(by_port.get(upstreams.split(", ")[-1], upstreams))
        return served

    def stop(self) -> None:
        for process in (*self.webs.values(), *self.workers.values()):
            process.stop()

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
            for path in sorted(self.root.glob("*.log"))
        )


@pytest.fixture
def campus(tmp_path, settings):
    redis.Redis.from_url(REDIS_URL).flushdb()
    campus = Campus(tmp_path)
    # This test's own reads of job folders and archives go to the shared folder too.
    settings.JOBS_DIR = campus.shared / "jobs"
    settings.DATASETS_DIR = campus.shared / "datasets"
    try:
        for name in campus.webs:
            campus.start_web(name)
        for worker in campus.workers.values():
            worker.start(campus.root / f"{worker.name}-var")
        yield campus
    finally:
        campus.stop()


@pytest.fixture
def front(campus, tmp_path):
    static = tmp_path / "static"
    static.mkdir()
    with nginx_site(
        tmp_path / "nginx",
        [f"127.0.0.1:{port}" for port in campus.ports.values()],
        static_dir=static,
        jobs_dir=campus.shared / "jobs",
        datasets_dir=campus.shared / "datasets",
    ) as nginx:
        yield nginx


def uploader(front, token: str, source: Path, chunk: int = CHUNK, **options) -> tus.Uploader:
    client = tus.TusClient(
        f"{front.https}/api/v1/dataset-uploads/", headers={"Authorization": f"Bearer {token}"}
    )
    return client.uploader(str(source), chunk_size=chunk, verify_tls_cert=False, **options)


def archives(folder: Path) -> list[Path]:
    """The archives a reader may take: a partial one (.partial-*) is no archive."""
    return [path for path in folder.glob("*.tar") if not path.name.startswith(".")]


def test_an_upload_survives_losing_a_web_process_and_any_process_serves_what_another_made(
    campus, front, student, tmp_path
):
    token = account_services.token_create(user=student, name="replicas").secret
    source = tmp_path / "frames.bin"
    source.write_bytes(os.urandom(24 * CHUNK))
    metadata = {"name": "frames", "filename": "frames.bin"}

    first = uploader(front, token, source, metadata=metadata)
    first.upload(stop_at=12 * CHUNK)
    patched = campus.served_by(front, "PATCH")
    assert len(patched) >= 12
    assert {"web-a", "web-b"} <= set(patched), patched  # round robin: both wrote chunks

    # web-a dies with a chunk half received: the chunk is lost, and nothing else.
    path = first.url.split("127.0.0.1", 1)[1].split("/", 1)[1]
    half_sent = socket.create_connection(("127.0.0.1", campus.ports["web-a"]), timeout=10)
    half_sent.sendall(
        (
            f"PATCH /{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\nTus-Resumable: 1.0.0\r\n"
            f"Upload-Offset: {first.offset}\r\n"
            "Content-Type: application/offset+octet-stream\r\n"
            f"Content-Length: {CHUNK}\r\n\r\n"
        ).encode()
        + source.read_bytes()[first.offset : first.offset + CHUNK // 2]
    )
    campus.webs["web-a"].kill()
    half_sent.close()
    second = uploader(front, token, source, url=first.url)
    assert second.offset == first.offset  # asked through the survivor, which read the row
    second.upload()
    after_kill = campus.served_by(front, "PATCH")[len(patched) :]
    assert after_kill and set(after_kill) == {"web-b"}, after_kill

    def imported() -> bool:
        return DatasetImport.objects.filter(state=DatasetImport.State.DONE).exists()

    wait_for(imported, timeout=180, what="the import, by either worker")
    done = DatasetImport.objects.get()
    took = [
        name
        for name, worker in campus.workers.items()
        if re.search(r"import_dataset\[[^]]+\] received", worker.log())
    ]
    assert len(took) == 1, campus.logs()  # one worker imported it, once
    assert done.version is not None

    # The archive made by one worker, in the shared folder: every web process sends it,
    # web-a started again with an empty var folder of its own.
    campus.start_web("web-a")
    headers = {"Authorization": f"Bearer {token}"}
    expected = hashlib.sha256(source.read_bytes()).hexdigest()
    served_before = len(campus.served_by(front, "GET"))
    # nginx sends nothing to web-a for 10 s after it failed (its fail_timeout), then both.
    deadline = time.monotonic() + 60
    while "web-a" not in campus.served_by(front, "GET")[served_before:]:
        assert time.monotonic() < deadline, "nginx never sent a request to web-a again"
        answer = httpx.get(
            f"{front.https}/api/v1/datasets/frames/versions/1/archive.tar",
            headers=headers,
            verify=False,
            timeout=60,
        )
        assert answer.status_code == 200, answer.text[:500]
        archive = tmp_path / "archive.tar"
        archive.write_bytes(answer.content)
        with tarfile.open(archive) as tar:
            [member] = [m for m in tar.getmembers() if m.isfile()]
            assert hashlib.sha256(tar.extractfile(member).read()).hexdigest() == expected
        time.sleep(0.5)

    # A job submitted through nginx fetches the dataset with its own credential, straight
    # from a web process that took no part in the import.
    api = httpx.Client(base_url=front.https, headers=headers, verify=False, timeout=60)
    answer = api.post(
        "/api/v1/jobs/",
        data={"name": "reader", "gpus": "0", "datasets": "frames"},
        files={"script": ("train.py", b"import nightshift\nnightshift.dataset_path('frames')\n")},
    )
    assert answer.status_code == 201, answer.text
    job = Job.objects.get(public_id=answer.json()["id"])
    assert job.directory.is_relative_to(campus.shared)
    ran = launch(job, tmp_path / "workstation-cache")
    assert ran.returncode == 0, ran.stdout + ran.stderr + campus.logs()
    [record] = delivered(job)
    assert (record["how"], record["reference"]) == ("fetched", "frames@1")


def test_a_worker_killed_mid_import_leaves_nothing_half_made_and_the_other_finishes_it(
    campus, front, student, tmp_path
):
    token = account_services.token_create(user=student, name="replicas").secret
    source = tmp_path / "scans.bin"
    with open(source, "wb") as out:  # large enough that packing it takes a while
        for block in range(64):
            out.write(hashlib.sha256(str(block).encode()).digest() * (4 * 2**20 // 32))
    metadata = {"name": "scans", "filename": "scans.bin"}
    uploader(front, token, source, chunk=32 * 2**20, metadata=metadata).upload()

    objects = campus.shared / "datasets" / "objects"

    def packing() -> bool:  # a worker has begun writing the archive
        return bool(list(objects.glob(".partial-*.tar")))

    wait_for(packing, timeout=120, interval=0.02, what="a worker to start packing the import")
    [worker] = [
        each
        for each in campus.workers.values()
        if re.search(r"import_dataset\[[^]]+\] received", each.log())
    ]
    worker.kill()
    imported = DatasetImport.objects.get()
    assert imported.state == DatasetImport.State.RUNNING  # killed mid-way, not after
    assert not archives(objects), "a half-made archive is visible"

    # Beat's recovery, half an hour on: the import's heartbeat has stopped, so it starts
    # again, on the worker that is left.
    DatasetImport.objects.update(heartbeat_at=imported.heartbeat_at - timedelta(minutes=31))
    subprocess.run(
        [str(Path(sys.executable).with_name("celery")), "-A", "portal", "call"]
        + ["datasets.tasks.recover_imports"],
        env=campus.env | {"NIGHTSHIFT_VAR_DIR": str(tmp_path / "beat-var")},
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=60,
    )

    def done() -> bool:
        return DatasetImport.objects.filter(state=DatasetImport.State.DONE).exists()

    wait_for(done, timeout=240, what="the import, finished by the other worker")
    imported.refresh_from_db()
    assert imported.attempts == 2
    [archive] = archives(objects)
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == archive.stem
    with tarfile.open(archive) as tar:
        [member] = [m for m in tar.getmembers() if m.isfile()]
        packed = hashlib.sha256(tar.extractfile(member).read()).hexdigest()
    assert packed == hashlib.sha256(source.read_bytes()).hexdigest()
