"""Real Celery processes (worker and beat) against the test database and Redis.

Integration tests submit through the real web views; the worker hands the job to
the real personal pool and beat syncs it, exactly as in production.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg2
import pytest
import redis
from django.conf import settings

from tests.helpers import free_port, pool_schedds, wait_for

# The checkout: the Celery and live-proxy processes start in it.
REPO = Path(__file__).resolve().parents[1]
CELERY = str(Path(sys.executable).with_name("celery"))


def database_url(name: str | None = None) -> str:
    """The test database's URL, for processes the test starts; or, with `name`, the URL of
    that database on the same server."""
    db = settings.DATABASES["default"]
    assert "postgresql" in db["ENGINE"], "integration tests run against PostgreSQL"
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{name or db['NAME']}"


def admin_sql(statement: str) -> None:
    """One statement on the test database's server, outside any transaction (CREATE and
    DROP DATABASE)."""
    server = psycopg2.connect(database_url("postgres"))
    server.autocommit = True
    try:
        with server.cursor() as cursor:
            cursor.execute(statement)
    finally:
        server.close()


class CeleryProcesses:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        # Where the worker keeps datasets; a test whose web side imports them must agree.
        self.datasets_dir = log_dir / "datasets"
        self.env = os.environ | {
            "NIGHTSHIFT_DATASETS_DIR": str(self.datasets_dir),
            "DATABASE_URL": database_url(),
            "NIGHTSHIFT_SYNC_INTERVAL": "1",
            "NIGHTSHIFT_RESUBMIT_AFTER_S": "10",
            "NIGHTSHIFT_STUDY_INTERVAL_S": "2",
            "NIGHTSHIFT_USAGE_SAMPLE_S": "2",
            "CELERY_VISIBILITY_TIMEOUT": "15",
            # The personal pool negotiates every 2 s: a job idle for a minute beside a free
            # workstation that fits it means the pool stopped matching, and its page says so.
            "NIGHTSHIFT_POOL_STALL_AFTER_S": "60",
            "PYTHONUNBUFFERED": "1",
        }
        self.worker: subprocess.Popen | None = None
        self.worker_env: dict[str, str] = {}
        self.beat: subprocess.Popen | None = None
        self._starts = 0

    def _spawn(self, args: list[str], name: str, extra_env: dict | None = None) -> subprocess.Popen:
        self._starts += 1
        log = open(self.log_dir / f"{name}-{self._starts}.log", "wb")  # noqa: SIM115
        return subprocess.Popen(
            [CELERY, "-A", "portal", *args],
            cwd=REPO,
            env=self.env | (extra_env or {}),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def start_worker(self, **extra_env: str) -> None:
        """A worker with the portal's settings and `extra_env` on top, which worker_env keeps
        for a test that kills the worker and starts it again as it was."""
        self.worker_env = extra_env
        hostname = f"test-worker-{self._starts}@%h"
        self.worker = self._spawn(
            [
                "worker",
                "--pool",
                "solo",
                "--loglevel",
                "INFO",
                "--hostname",
                hostname,
                "--without-mingle",
                "--without-gossip",
            ],
            "worker",
            extra_env,
        )
        from portal.celery import app

        def answers() -> bool:
            try:
                return bool(app.control.ping(timeout=0.5))
            except (OSError, redis.exceptions.ConnectionError):  # Redis just dropped us
                return False

        wait_for(answers, timeout=60, what="the Celery worker")

    def kill_worker(self) -> None:
        """SIGKILL the worker's process group; one that has died already (a test that failed
        may have left it so) is only reaped."""
        assert self.worker is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.worker.pid, signal.SIGKILL)
        self.worker.wait(timeout=10)

    def start_beat(self) -> None:
        self.beat = self._spawn(
            [
                "beat",
                "--loglevel",
                "INFO",
                "--scheduler",
                "celery.beat:PersistentScheduler",
                "--schedule",
                str(self.log_dir / "beat-schedule"),
            ],
            "beat",
        )

    def restart_beat(self) -> None:
        """SIGKILL beat, wherever it is, and start it again."""
        assert self.beat is not None
        os.killpg(self.beat.pid, signal.SIGKILL)
        self.beat.wait(timeout=10)
        self.start_beat()

    def stop(self) -> None:
        for process in (self.worker, self.beat):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}"
            for path in sorted(self.log_dir.glob("*.log"))
        )


@pytest.fixture(scope="session")
def pool_is_up():
    """The personal pool must be running: integration tests are never skipped."""
    from jobs.bridge import get_bridge

    get_bridge.cache_clear()
    try:
        get_bridge().ping()
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"the personal pool is not answering ({exc}); run `make pool-start`")


@pytest.fixture(scope="session")
def celery_processes(django_db_setup, django_db_blocker, tmp_path_factory, pool_is_up):
    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    processes = CeleryProcesses(tmp_path_factory.mktemp("celery"))
    processes.start_beat()
    processes.start_worker()
    yield processes
    processes.stop()


@pytest.fixture
def live_pipeline(celery_processes, transactional_db, request):
    """A worker and beat running; on failure, their logs are printed."""
    if celery_processes.worker is None or celery_processes.worker.poll() is not None:
        celery_processes.start_worker()
    yield celery_processes
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        print(celery_processes.logs())


@pytest.fixture(scope="module")
def second_schedd_for_the_module(celery_processes):
    """For a module whose every test uses two_schedds: the pool's second schedd runs from the
    first test to the last instead of starting and stopping around each (each start and stop
    took 10-15 s of a 2-core CI machine's time). A test that stops it goes last, so that no
    other test meets a schedd started again mid-module. Afterwards the worker uses the one
    schedd again."""
    yield pool_schedds(2)
    pool_schedds(1)
    celery_processes.kill_worker()
    celery_processes.start_worker()


@pytest.fixture
def two_schedds(live_pipeline, settings, request):
    """The pool's second schedd running, and the portal (this process and its worker) using
    both, least loaded first: ap2 as a remote access point, whose jobs' files go through
    HTCondor's spool."""
    from condor_bridge import BridgeError
    from jobs.bridge import get_bridge
    from jobs.models import FINAL_STATES, Job

    kept = "second_schedd_for_the_module" in request.fixturenames
    if kept:
        first, second = request.getfixturevalue("second_schedd_for_the_module")
    else:
        first, second = pool_schedds(2)
    choice = {
        "CONDOR_SCHEDDS": f"{first},{second}",
        "CONDOR_SCHEDD_NAME": first,
        "CONDOR_SPOOL_SCHEDDS": second,
        "NIGHTSHIFT_SCHEDD_POLICY": "least-loaded",
    }
    settings.CONDOR_SCHEDDS, settings.CONDOR_SCHEDD_NAME = [first, second], first
    settings.CONDOR_SPOOL_SCHEDDS, settings.SCHEDD_POLICY = [second], "least-loaded"
    live_pipeline.kill_worker()
    live_pipeline.start_worker(**choice)
    try:
        yield first, second
    finally:
        # Nothing of this test waits in ap2's queue for the next test or the next time it
        # starts.
        pool_schedds(2)
        for job in Job.objects.filter(cluster_id__isnull=False).exclude(state__in=FINAL_STATES):
            try:
                get_bridge(job.schedd).act("remove", job.cluster_id, job.proc_id, reason="test")
            except BridgeError:  # gone already
                continue
        if not kept:
            pool_schedds(1)
            live_pipeline.kill_worker()
            live_pipeline.start_worker()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def wait_for_state(job, states, timeout=120):
    states = set(states)

    def probe():
        job.refresh_from_db()
        return job.state in states

    wait_for(probe, timeout=timeout, what=f"job {job.name!r} to reach {sorted(states)}")
    return job


def settle(seconds: float) -> None:
    time.sleep(seconds)


@pytest.fixture(scope="session", autouse=True)
def flush_retries_a_deadlock_with_the_live_worker():
    """A transactional test ends by truncating every table while the real worker may be in
    the middle of a sync transaction; PostgreSQL then aborts one of the two. The worker
    retries its own; this retries the flush. Production never truncates its tables."""
    from django.test import TransactionTestCase

    original = TransactionTestCase._fixture_teardown

    def teardown_with_retries(self):
        for attempt in range(3):
            try:
                return original(self)
            except Exception as exc:  # noqa: BLE001 - CommandError wraps the deadlock
                cause = exc.__cause__ or exc.__context__ or exc
                if "deadlock detected" not in str(cause) or attempt == 2:
                    raise
                time.sleep(0.5)
        return None

    TransactionTestCase._fixture_teardown = teardown_with_retries
    yield
    TransactionTestCase._fixture_teardown = original


class LiveProxyProcess:
    """The live proxy as `make run` starts it (uvicorn portal.asgi_live), against the test
    database, reaching jobs through the personal pool's condor_ssh_to_job."""

    def __init__(self, log_dir: Path, *, portal_url: str) -> None:
        self.port = free_port()
        # On the portal's host name: the two must be one site, for the proxy's cookie to
        # work in the session page's frame (SameSite=Lax).
        host = portal_url.split("://", 1)[1].split(":")[0].split("/")[0]
        self.url = f"http://{host}:{self.port}"
        self.log_path = log_dir / "live-proxy.log"
        # The portal it serves (whose session pages frame it): the tests' live server.
        env = os.environ | {
            "DATABASE_URL": database_url(),
            "NIGHTSHIFT_LIVE_REAP_S": "1",
            "NIGHTSHIFT_PORTAL_URL": portal_url,
            "NIGHTSHIFT_LIVE_URL": self.url,
            "PYTHONUNBUFFERED": "1",
        }
        self.process = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("uvicorn")),
                "portal.asgi_live:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--ws",
                "websockets-sansio",
                "--lifespan",
                "on",
                "--log-level",
                "info",
            ],
            cwd=REPO,
            env=env,
            stdout=open(self.log_path, "wb"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def answers() -> bool:
            import httpx

            try:
                return httpx.get(f"{self.url}/live/", timeout=2).status_code == 404
            except httpx.HTTPError:
                return False

        wait_for(answers, timeout=60, what="the live proxy")

    def log(self, tail: int | None = 6000) -> str:
        text = self.log_path.read_text(errors="replace")
        return text[-tail:] if tail else text

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def live_proxy_process(django_db_setup, tmp_path_factory, pool_is_up, live_server):
    proxy = LiveProxyProcess(tmp_path_factory.mktemp("live"), portal_url=live_server.url)
    yield proxy
    proxy.stop()


@pytest.fixture
def live_proxy(live_proxy_process, live_pipeline, settings, request):
    """The live proxy and the pipeline; the portal's links point at this proxy."""
    settings.LIVE_URL = live_proxy_process.url
    yield live_proxy_process
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        print(live_proxy_process.log())
