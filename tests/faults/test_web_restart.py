"""The web server killed (SIGKILL, workers and all) and started again while a burst of
submissions arrives through it over HTTP, and beat killed in the middle of its sync at the
same moment. A request that reached gunicorn either created a job or did not; each job
that exists runs exactly once, and the client's retries after the outage go through."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from accounts.services import token_create
from jobs.models import Job
from tests.faults.conftest import BURST, QUICK_JOB, assert_spread_over
from tests.helpers import free_port, wait_for
from tests.pipeline import REPO, database_url

pytestmark = [pytest.mark.condor, pytest.mark.timeout(900)]


class WebServer:
    """gunicorn as `make run` starts it, serving the test database; started again on the
    same port, which the kernel chose free when the server was made."""

    def __init__(self, log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_dir = log_dir
        self.env = env or {}
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = open(self.log_dir / f"gunicorn-{self.starts}.log", "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("gunicorn")),
                "portal.wsgi",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                "2",
                "--threads",
                "4",
            ],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=os.environ
            | {"DATABASE_URL": database_url(), "NIGHTSHIFT_SUBMIT_RATE": "10000/minute"}
            | self.env,
        )

        def answers() -> bool:
            try:
                return httpx.get(f"{self.url}/accounts/login/").status_code == 200
            except httpx.TransportError:
                return False

        wait_for(answers, timeout=60, what="gunicorn")

    def kill(self) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.kill()


class HttpBurst(threading.Thread):
    """A power user's script: submits until `count` are accepted, retrying what failed."""

    def __init__(self, url: str, token: str, count: int) -> None:
        super().__init__(daemon=True)
        self.url, self.token, self.count = url, token, count
        self.accepted: list[str] = []
        self.failed_attempts = 0

    def run(self) -> None:
        with httpx.Client(
            base_url=self.url,
            timeout=30,
            headers={"Authorization": f"Bearer {self.token}"},
        ) as client:
            while len(self.accepted) < self.count:
                try:
                    response = client.post(
                        "/api/v1/jobs/",
                        data={
                            "name": f"web burst {len(self.accepted)}",
                            "memory_gb": "0.25",
                        },
                        files={"script": ("train.py", QUICK_JOB.encode())},
                    )
                except httpx.TransportError:
                    self.failed_attempts += 1
                    time.sleep(0.2)
                    continue
                if response.status_code == 201:
                    self.accepted.append(response.json()["id"])
                else:
                    self.failed_attempts += 1
                    time.sleep(0.2)


@pytest.fixture
def web_server(tmp_path):
    server = WebServer(tmp_path)
    server.start()
    yield server
    server.stop()


def send_through_a_web_server_killed_and_restarted(burst, live_pipeline, web_server) -> None:
    """A burst over HTTP while gunicorn is killed and started again (and beat killed in its
    sync); then every job that exists must run once."""
    user = burst.user
    sender = HttpBurst(web_server.url, token_create(user=user, name="script").secret, BURST)
    sender.start()
    wait_for(
        lambda: len(sender.accepted) >= BURST // 3,
        timeout=120,
        what="a third of the burst to be accepted",
    )
    web_server.kill()
    live_pipeline.restart_beat()  # killed wherever its sync was
    time.sleep(3)  # the script meets a closed port meanwhile
    web_server.start()
    sender.join(timeout=300)
    assert not sender.is_alive(), f"only {len(sender.accepted)} of {BURST} accepted"
    assert sender.failed_attempts > 0, "the outage should have refused some attempts"

    burst.jobs = list(Job.objects.filter(owner=user))
    # Accepted answers all name jobs that exist; a request killed before its answer may
    # have created one more, which must run once like the others.
    assert {str(job.public_id) for job in burst.jobs} >= set(sender.accepted)
    burst.assert_each_ran_once_and_completed()


def test_jobs_sent_through_a_web_server_killed_and_restarted_each_run_once(
    burst, live_pipeline, web_server
):
    send_through_a_web_server_killed_and_restarted(burst, live_pipeline, web_server)


def test_the_same_over_two_schedds_sends_each_job_once_to_its_own(
    spread_burst, two_schedds, live_pipeline, tmp_path
):
    # The web server chooses each job's schedd: it gets the worker's two-schedd settings.
    server = WebServer(tmp_path, env=live_pipeline.worker_env)
    server.start()
    try:
        send_through_a_web_server_killed_and_restarted(spread_burst, live_pipeline, server)
    finally:
        server.stop()
    assert_spread_over(two_schedds, spread_burst.jobs)
