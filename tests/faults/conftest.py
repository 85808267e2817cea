"""Fault injection against the real parts: the personal pool, PostgreSQL, Redis, and real
Celery worker and beat processes. Each scenario breaks something during a burst of
submissions, then checks the two promises: every accepted job exists exactly once in
HTCondor (queue plus history, counted with HTCondor's own tools), and every one reaches
the right final state in the portal."""

from __future__ import annotations

import collections
import faulthandler
import threading
import time

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.urls import reverse

from accounting.models import UsageRecord
from condor_bridge.states import STAGING_FAILED_REASON
from jobs import sync
from jobs.models import Job, JobEvent, JobState
from tests.conftest import client_with_token, script_upload
from tests.helpers import pool_command, wait_for

BURST = 50
QUICK_JOB = "import time\ntime.sleep(2)\nprint('done', flush=True)\n"


class Burst:
    """Submissions through the API, as a power user's script sends them."""

    def __init__(self) -> None:
        self.user = get_user_model().objects.create_user(f"burst-{time.monotonic_ns()}")
        self.api = client_with_token(self.user)
        self.jobs: list[Job] = []
        # The schedds to count copies in, besides the pool's own (which HTCondor's tools
        # reach without a name): `pool schedds 2` adds ap2.
        self.other_schedds: list[str] = []

    def submit(self, count: int, script: str = QUICK_JOB, **fields) -> list[Job]:
        new = []
        for number in range(count):
            response = self.api.post(
                reverse("api:job-list"),
                {
                    "name": f"burst {len(self.jobs) + number}",
                    "script": script_upload(script),
                    "memory_gb": 0.25,
                    **fields,
                },
                format="multipart",
            )
            assert response.status_code == 201, response.content
            new.append(Job.objects.get(public_id=response.json()["id"]))
        self.jobs += new
        return new

    def copies_in_htcondor(self) -> collections.Counter:
        """How many HTCondor jobs carry each of this burst's ids, queue plus history.

        A job is counted by its GlobalJobId, so that one leaving the queue for the history
        between the two tools' calls (a spooled job whose outputs the worker is retrieving
        just then) is still one job, as it is to HTCondor. A copy the schedd removed because
        its submitter was killed mid-spool never had its files and never started: the retry
        submits the job again (condor_bridge.states.staging_failed), and such a copy can
        leave the queue before the retry could rename it. It is not counted, unless it
        started."""
        constraint = f'NightshiftInstance == "{settings.NIGHTSHIFT_INSTANCE}"'
        seen: dict[str, set[str]] = collections.defaultdict(set)
        for name in ([], *(["-name", schedd] for schedd in self.other_schedds)):
            for tool in (["condor_q", "-allusers"], ["condor_history"]):
                done = pool_command(
                    *tool,
                    *name,
                    "-constraint",
                    constraint,
                    "-af",
                    "NightshiftJobId",
                    "GlobalJobId",
                    "NumJobStarts",
                    "RemoveReason",
                )
                for line in done.stdout.splitlines():
                    if not line.strip():
                        continue
                    job_id, global_id, starts, remove_reason = line.split(maxsplit=3)
                    never_had_its_files = remove_reason == STAGING_FAILED_REASON
                    if never_had_its_files and starts in ("0", "undefined"):
                        continue
                    seen[job_id].add(global_id)
        return collections.Counter(
            {str(job.public_id): len(seen[str(job.public_id)]) for job in self.jobs}
        )

    def wait_until_final(self, timeout: float = 420) -> None:
        ids = [job.pk for job in self.jobs]

        def all_final():
            unfinished = Job.objects.filter(pk__in=ids).exclude(
                state__in=(JobState.COMPLETED, JobState.FAILED, JobState.REMOVED)
            )
            return not unfinished.exists()

        try:
            wait_for(all_final, timeout=timeout, interval=2, what=f"{len(ids)} jobs to finish")
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}; those not final: {self.unfinished()}") from None

    def unfinished(self) -> list[tuple]:
        """What the portal and HTCondor each say of the jobs that have not ended: a timeout's
        message, so that a stall can be told from a job HTCondor never ran."""
        rows = Job.objects.filter(pk__in=[job.pk for job in self.jobs]).exclude(
            state__in=(JobState.COMPLETED, JobState.FAILED, JobState.REMOVED)
        )
        return [
            (
                job.name,
                job.state,
                job.schedd,
                job.cluster_id,
                job.status_detail,
                job.wait_reason,
                job.last_error,
                list(job.events.values_list("kind", flat=True)),
            )
            for job in rows
        ]

    def assert_each_ran_once_and_completed(self) -> None:
        self.wait_until_final()
        states = collections.Counter(
            Job.objects.filter(pk__in=[job.pk for job in self.jobs]).values_list("state", flat=True)
        )
        failures = [
            (
                job.name,
                job.state,
                job.status_detail,
                job.wait_reason,
                job.last_error,
                list(job.events.values_list("kind", "detail")),
            )
            for job in Job.objects.filter(pk__in=[j.pk for j in self.jobs]).exclude(
                state=JobState.COMPLETED
            )
        ]
        assert states == {JobState.COMPLETED: len(self.jobs)}, failures
        copies = self.copies_in_htcondor()
        assert sorted(set(copies.values())) == [1], {k: v for k, v in copies.items() if v != 1}


@pytest.fixture
def burst(live_pipeline, settings) -> Burst:
    # After a whole-pool restart HTCondor retries reconnecting to running jobs for the job
    # lease (40 minutes by default) before running them again: a minute here.
    settings.JOB_LEASE_S = 60
    return Burst()


@pytest.fixture
def spread_burst(burst, two_schedds):
    """A burst over the pool's two schedds (tests.pipeline.two_schedds), counted in both."""
    burst.other_schedds = [two_schedds[1]]
    return burst


def assert_spread_over(schedds, jobs) -> None:
    placed = collections.Counter(
        Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("schedd", flat=True)
    )
    assert set(placed) == set(schedds), placed


def redis_loses_everything() -> None:
    """What a Redis restart does to Nightshift, on the shared test server: every client's
    connection drops and the broker's database comes back empty (this Redis keeps nothing
    on disk), queued tasks and all. Only this test run's clients, those of its own database:
    the test runs beside it (make test's other lanes) use the same server."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    database = client.connection_pool.connection_kwargs.get("db", 0)
    client.flushdb()
    me = client.client_id()
    for other in client.client_list(_type="normal"):
        if int(other["db"]) == database and int(other["id"]) != me:
            client.client_kill_filter(_id=other["id"])


def syncs_overlap_until_final(burst: Burst, threads: int = 4) -> None:
    """`threads` syncs again and again at once, beside beat's, until the burst has ended."""
    stop = threading.Event()
    errors = []

    def sync_again_and_again():
        try:
            while not stop.is_set():
                sync.jobs_sync()
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    running = [threading.Thread(target=sync_again_and_again) for _ in range(threads)]
    for thread in running:
        thread.start()
    try:
        burst.wait_until_final()
    except AssertionError:
        # Where each sync stood when the burst stalled, in the test's captured stderr.
        faulthandler.dump_traceback(all_threads=True)
        raise
    finally:
        stop.set()
        for thread in running:
            thread.join(timeout=60)
    assert errors == []
    assert not [thread for thread in running if thread.is_alive()], "a sync never returned"


def assert_each_change_recorded_once(burst: Burst, jobs: list[Job]) -> None:
    """Each job ran once and completed, and its timeline and usage record each of its
    changes once."""
    burst.assert_each_ran_once_and_completed()
    ids = [job.pk for job in jobs]
    events = collections.Counter(
        JobEvent.objects.filter(
            job_id__in=ids, kind__in=("submitted", "started", "completed")
        ).values_list("job_id", "kind")
    )
    assert set(events.values()) == {1}, {k: v for k, v in events.items() if v != 1}
    assert len(events) == 3 * len(jobs)
    runs = collections.Counter(
        UsageRecord.objects.filter(job_id__in=ids).values_list("job_id", flat=True)
    )
    assert sorted(set(runs.values())) == [1]


def postgres_drops_every_connection() -> None:
    """What a PostgreSQL restart does to its clients: every session of the test database,
    the worker's, beat's and the web's, is terminated at once."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
