"""A whole class watching its jobs: the job page's status poll, answered 304 when nothing
changed, against the full document in the same run.

Run with `make bench-polls` (PostgreSQL and Redis must be up; HTCondor is not needed: the
poll reads the database and the job folders). It makes a throw-away database with 1,000
students, each with one running job (a 50 KB log, 20 events, 5 output files), and starts
gunicorn as `make run` does (2 workers of 4 threads). Then:

1. Server CPU per poll, from the gunicorn workers' own CPU time (/proc), and PostgreSQL's,
   over 2,000 polls sent 8 at a time: a page's first poll (the full document, which the
   304 is measured against), and a page's next poll with the ETag it was given, answered
   304 by the status-poll middleware (jobs/polling.py); and the floor, gunicorn serving a
   WSGI app that answers 304 at once (bench/wsgi_floor.py).
2. A class of 1,000 students opening their job pages over 20 s and watching them until
   80 s, while 5 % of the jobs write a log line each second: requests per second, p50 and
   p95 of the open pages' polls, p95 of the pages' first polls, errors.
   Once with every page polling every 2 s, once as the page polls (1.5 x longer after each
   unchanged answer, up to 10 s). The client (aiohttp) polls as static/js/job_detail.js does.

The client runs on the same 2 cores as gunicorn and PostgreSQL, so rates are a floor.
The last line reads `poll unchanged: C ms CPU (R x the full document); p95 with 1,000
students watching: P ms`.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

from portal_setup import Gunicorn, serve_gunicorn, setup_django

REPO = setup_django(fake_bridge=True)

import logging  # noqa: E402

import aiohttp  # noqa: E402
import psycopg2  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from jobs.models import Job, JobEvent, JobState  # noqa: E402

# --quick: a small class for a few seconds, for make test (tests/bench), which checks it
# still runs.
QUICK = "--quick" in sys.argv[1:]
STUDENTS = 40 if QUICK else 1000
POLL_INTERVAL_S = 2.0
MAX_POLL_INTERVAL_S = 10.0
# A class arrives: each student opens their page at a moment of the first OPEN_SECONDS (a
# page's first poll is the whole document), and every page stays open until WATCH_SECONDS.
OPEN_SECONDS = 2 if QUICK else 20
WATCH_SECONDS = 4 if QUICK else 80
CPU_POLLS = 100 if QUICK else 2000
LOG_LINE = "epoch 3 step 1200 loss 0.4182 lr 0.00030 throughput 412.5 samples/s\n"
REQUEST = {
    "script_name": "train.py",
    "arguments": ["--epochs", "5"],
    "gpus": 1,
    "cpus": 2,
    "memory_mb": 4096,
    "output_paths": ["outputs"],
}
TICKS = os.sysconf("SC_CLK_TCK")


def make_world(folder: Path) -> list[dict]:
    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"student{i:04d}") for i in range(STUDENTS)]
    )
    log = LOG_LINE * (50_000 // len(LOG_LINE))
    jobs = []
    for user in users:
        directory = folder / user.username
        (directory / "outputs").mkdir(parents=True)
        (directory / "stdout.txt").write_text(log)
        for n in range(5):
            (directory / "outputs" / f"checkpoint-{n}.pt").write_bytes(b"w" * 1000)
        jobs.append(
            Job(
                owner=user,
                name="resnet50 on imagenet-mini",
                request=REQUEST,
                state=JobState.RUNNING,
                output_dir=str(directory),
                cluster_id=1,
                proc_id=0,
                workstation="ws-ampere",
            )
        )
    Job.objects.bulk_create(jobs, batch_size=2000)
    JobEvent.objects.bulk_create(
        [
            JobEvent(job=job, kind="note", state=JobState.RUNNING, detail=f"step {n}")
            for job in jobs
            for n in range(20)
        ],
        batch_size=5000,
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    students = []
    for user, job in zip(users, jobs, strict=True):
        client = Client()
        client.force_login(user)
        students.append(
            {
                "session": client.cookies["sessionid"].value,
                "job": str(job.public_id),
                "folder": folder / user.username,
                "offset": len(log),
            }
        )
    return students


def workers_cpu_s(master: Gunicorn) -> float:
    """User plus system CPU of gunicorn's worker processes, in seconds."""
    children = Path(f"/proc/{master.pid}/task/{master.pid}/children").read_text().split()
    return sum(process_cpu_s(int(child)) for child in children)


def process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def postgres_backends_cpu_s() -> dict[int, float]:
    """CPU of each PostgreSQL backend serving the benchmark's database (gunicorn's, which
    keeps its connections), by pid."""
    # Straight through psycopg2: this is called from the client's event loop, where Django
    # refuses to query.
    database = psycopg2.connect(**connection.get_connection_params())
    with closing(database), database.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        pids = [pid for (pid,) in cursor.fetchall()]
    found = {}
    for pid in pids:
        try:
            found[pid] = process_cpu_s(pid)
        except OSError:
            continue
    return found


def postgres_cpu_since(before: dict[int, float]) -> float:
    after = postgres_backends_cpu_s()
    return sum(after[pid] - cpu for pid, cpu in before.items() if pid in after)


class Page:
    """One student's open job page, as static/js/job_detail.js polls: offsets start at -1
    (a log's tail), then where each answer left them; the ETag of the last answer is sent
    back, with the offer to take only the logs' new text; 1.5 x longer after each 304 (up to
    10 s) when backing off, 2 s after a change."""

    def __init__(self, student: dict, server: Gunicorn) -> None:
        self.student = student
        self.server = server
        self.offsets = {"stdout": -1, "stderr": -1, "install": -1}
        self.etag = None
        self.delay = POLL_INTERVAL_S
        self.logs_only = 0

    def url(self) -> str:
        query = "&".join(f"{stream}_offset={o}" for stream, o in self.offsets.items())
        return f"{self.server.url}/jobs/{self.student['job']}/status.json?{query}"

    async def poll(self, session: aiohttp.ClientSession, *, backoff: bool = True) -> int:
        headers = {"Cookie": f"sessionid={self.student['session']}"}
        if self.etag:
            headers |= {"If-None-Match": self.etag, "X-Nightshift-Partial": "logs"}
        async with session.get(self.url(), headers=headers) as answer:
            if answer.status == 200:
                document = await answer.json()
                self.logs_only += document.get("logs_only", False)
                self.etag, self.delay = answer.headers["ETag"], POLL_INTERVAL_S
                self.offsets = {s: chunk["offset"] for s, chunk in document["logs"].items()}
            elif answer.status == 304 and backoff:
                self.delay = min(self.delay * 1.5, MAX_POLL_INTERVAL_S)
            return answer.status


def client_session(connections: int) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections, keepalive_timeout=75),
        timeout=aiohttp.ClientTimeout(total=60),
    )


async def cpu_per_poll(master: Gunicorn, students, *, kind: str) -> tuple[float, float, float]:
    """Server CPU ms per poll (gunicorn's workers, then PostgreSQL's), and the share of polls
    answered as `kind` expects. "first": every poll is a page's first (the full document);
    "unchanged": each page has had its first answer and asks again as it would next (304);
    "log grew": the same, after its job wrote a log line (the new text alone)."""
    async with client_session(8) as session:
        pages = [Page(student, master) for student in students[:50]]
        if kind != "first":
            for page in pages:
                await page.poll(session)
        queue = [pages[i % len(pages)] for i in range(CPU_POLLS)]
        answered = []

        async def one(page):
            if kind == "first":
                page.etag, page.offsets = None, {s: -1 for s in page.offsets}
            elif kind == "log grew":
                with open(page.student["folder"] / "stdout.txt", "a") as log:
                    log.write(LOG_LINE)
            before = page.logs_only
            status = await page.poll(session)
            logs_only = page.logs_only - before
            if kind == "unchanged":
                answered.append(status == 304)
            else:
                answered.append(status == 200 and logs_only == (kind == "log grew"))

        before, before_db = workers_cpu_s(master), postgres_backends_cpu_s()
        for start in range(0, len(queue), 8):
            await asyncio.gather(*(one(page) for page in queue[start : start + 8]))
        spent, spent_db = workers_cpu_s(master) - before, postgres_cpu_since(before_db)
    return spent * 1000 / len(queue), spent_db * 1000 / len(queue), sum(answered) / len(answered)


async def floor_cpu_per_request(master: Gunicorn) -> float:
    """gunicorn's own CPU per request, answering 304 with nothing behind it, sent as the
    unchanged polls are (8 at a time, each with a cookie and an ETag)."""
    url = f"{master.url}/jobs/x/status.json?stdout_offset=1"
    headers = {"Cookie": "sessionid=x", "If-None-Match": '"floor"'}
    async with client_session(8) as session:

        async def one():
            async with session.get(url, headers=headers) as answer:
                assert answer.status == 304

        for _ in range(8):
            await one()
        before = workers_cpu_s(master)
        for _ in range(CPU_POLLS // 8):
            await asyncio.gather(*(one() for _ in range(8)))
        return (workers_cpu_s(master) - before) * 1000 / CPU_POLLS


async def class_watching(server: Gunicorn, students, *, backoff: bool) -> dict:
    """Each student opens their job page at a moment of the first OPEN_SECONDS, and it polls
    as the page does (or every POLL_INTERVAL_S without backing off) until WATCH_SECONDS
    while 5 % of the jobs write a log line each second."""
    first_latencies, open_latencies, statuses, pages = [], [], [], []
    deadline = time.monotonic() + WATCH_SECONDS

    async def watch(page, session):
        await asyncio.sleep(random.uniform(0, OPEN_SECONDS))
        while time.monotonic() < deadline:
            started = time.monotonic()
            opened = page.etag is not None
            try:
                statuses.append(await page.poll(session, backoff=backoff))
            except (TimeoutError, aiohttp.ClientError):
                statuses.append(0)
            (open_latencies if opened else first_latencies).append(time.monotonic() - started)
            await asyncio.sleep(max(page.delay - (time.monotonic() - started), 0))

    async def training():
        while time.monotonic() < deadline:
            for student in random.sample(students, STUDENTS // 20):
                with open(student["folder"] / "stdout.txt", "a") as log:
                    log.write(LOG_LINE)
            await asyncio.sleep(1)

    async with client_session(STUDENTS) as session:
        started, cpu = time.monotonic(), time.process_time()
        pages = [Page(s, server) for s in students]
        await asyncio.gather(training(), *(watch(page, session) for page in pages))
        elapsed = time.monotonic() - started
        client_cores = (time.process_time() - cpu) / elapsed
    first = statistics.quantiles(first_latencies, n=100)
    cuts = statistics.quantiles(open_latencies, n=100)
    return {
        "rps": len(statuses) / elapsed,
        "p50": cuts[49] * 1000,
        "p95": cuts[94] * 1000,
        "first_p95": first[94] * 1000,
        "logs_only": sum(page.logs_only for page in pages) / len(statuses),
        "errors": sum(1 for s in statuses if s not in (200, 304)),
        "polls": len(statuses),
        "unchanged": statuses.count(304) / len(statuses),
        "client": client_cores,
    }


def main() -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    server = None
    with tempfile.TemporaryDirectory(prefix="nightshift-polls-") as scratch:
        try:
            students = make_world(Path(scratch))
            connection.close()  # gunicorn's workers open their own
            server = serve_gunicorn("--keep-alive", "75")
            cpu = {
                kind: asyncio.run(cpu_per_poll(server, students, kind=kind))
                for kind in ("first", "unchanged", "log grew")
            }
            floor = serve_gunicorn("--keep-alive", "75", "--pythonpath", "bench", app="wsgi_floor")
            try:
                floor_ms = asyncio.run(floor_cpu_per_request(floor))
            finally:
                floor.stop()
            every_2s = asyncio.run(class_watching(server, students, backoff=False))
            as_the_page = asyncio.run(class_watching(server, students, backoff=True))
        finally:
            if server is not None:
                server.stop()
            connection.creation.destroy_test_db(old_name, verbosity=0)

    print(
        f"\nNightshift status polls ({time.strftime('%Y-%m-%d %H:%M')}; gunicorn 2 workers x 4 "
        f"threads, {os.cpu_count()} cores shared with the client and PostgreSQL)\n"
    )
    print("| poll | server CPU per poll (gunicorn) | PostgreSQL's CPU per poll | answered so |")
    print("| --- | --- | --- | --- |")
    names = {
        "first": "a page's first: the whole document (200)",
        "unchanged": "nothing changed: 304",
        "log grew": "only the log grew: its new text (200, logs_only)",
    }
    for kind, name in names.items():
        print(f"| {name} | {cpu[kind][0]:.2f} ms | {cpu[kind][1]:.2f} ms | {cpu[kind][2]:.0%} |")
    print(f"| floor: gunicorn answering 304 with nothing behind it | {floor_ms:.2f} ms | - | - |")
    print(f"\n{STUDENTS:,} students opening their job pages over {OPEN_SECONDS} s and watching")
    print(f"them until {WATCH_SECONDS} s, 5 % of the logs growing each second (p50 and p95 of")
    print("the open pages' polls, then p95 of the pages' first polls):\n")
    print(
        "| polling | polls/s | p50 ms | p95 ms | first poll p95 ms | answered 304 | "
        "logs only | errors | client's own CPU |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, run in (
        ("every 2 s", every_2s),
        ("as the page does (2 s, backing off to 10 s)", as_the_page),
    ):
        print(
            f"| {name} | {run['rps']:.0f} | {run['p50']:.0f} | {run['p95']:.0f} | "
            f"{run['first_p95']:.0f} | {run['unchanged']:.0%} | {run['logs_only']:.0%} | "
            f"{run['errors']} of {run['polls']:,} | {run['client']:.2f} cores |"
        )
    print(
        f"poll unchanged: {cpu['unchanged'][0]:.2f} ms CPU "
        f"({cpu['unchanged'][0] / cpu['first'][0]:.2f} x the full document, "
        f"{cpu['unchanged'][0] - floor_ms:.2f} ms over gunicorn's floor); "
        f"p95 with {STUDENTS:,} students watching: {as_the_page['p95']:.0f} ms"
    )


if __name__ == "__main__":
    main()
