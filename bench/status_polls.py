"""A whole class watching its jobs: the job page's status poll, answered 304 when nothing
changed, against the full document in the same run.

Run with `make bench-polls` (PostgreSQL and Redis must be up; HTCondor is not needed: the
poll reads the database and the job folders). It makes a throw-away database with 1,000
students, each with one running job (a 50 KB log, 20 events, 5 output files), and starts
gunicorn as `make run` does (2 workers of 4 threads). Then:

1. Server CPU per poll, from the gunicorn workers' own CPU time (/proc), over 2,000 polls
   sent 8 at a time: the full document (the floor the ETag is measured against), and the
   same poll with the ETag the browser keeps, answered 304.
2. 1,000 students each watching a job page for 30 s, while 5 % of the jobs write a log line
   each second: requests per second, p50 and p95, errors. Once with every page polling
   every 2 s, once as the page polls (1.5 x longer after each unchanged answer, up to 10 s).

The client runs on the same 2 cores as gunicorn and PostgreSQL, so rates are a floor.
The last line reads `poll unchanged / full: R x CPU; p95 with 1,000 students: P ms`.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from portal_setup import serve_gunicorn, setup_django

REPO = setup_django(fake_bridge=True)

import logging  # noqa: E402

import httpx  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from jobs.models import Job, JobEvent, JobState  # noqa: E402

STUDENTS = 1000
PORT = 8767
POLL_INTERVAL_S = 2.0
MAX_POLL_INTERVAL_S = 10.0
WATCH_SECONDS = 30
CPU_POLLS = 2000
LOG_LINE = "epoch 3 step 1200 loss 0.4182 lr 0.00030 throughput 412.5 samples/s\n"
REQUEST = {"script_name": "train.py", "arguments": ["--epochs", "5"], "gpus": 1, "cpus": 2,
           "memory_mb": 4096, "output_paths": ["outputs"]}  # fmt: skip
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
        jobs.append(Job(owner=user, name="resnet50 on imagenet-mini", request=REQUEST,
                        state=JobState.RUNNING, output_dir=str(directory), cluster_id=1,
                        proc_id=0, workstation="ws-ampere"))  # fmt: skip
    Job.objects.bulk_create(jobs, batch_size=2000)
    JobEvent.objects.bulk_create(
        [JobEvent(job=job, kind="note", state=JobState.RUNNING, detail=f"step {n}")
         for job in jobs for n in range(20)], batch_size=5000,
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    students = []
    for user, job in zip(users, jobs, strict=True):
        client = Client()
        client.force_login(user)
        students.append({"session": client.cookies["sessionid"].value, "job": str(job.public_id),
                         "folder": folder / user.username, "offset": len(log)})  # fmt: skip
    return students


def workers_cpu_s(master: subprocess.Popen) -> float:
    """User plus system CPU of gunicorn's worker processes, in seconds."""
    total = 0.0
    for child in Path(f"/proc/{master.pid}/task/{master.pid}/children").read_text().split():
        fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def poll_url(student: dict) -> str:
    return (f"http://127.0.0.1:{PORT}/jobs/{student['job']}/status.json?"
            f"stdout_offset={student['offset']}&stderr_offset=0&install_offset=0")  # fmt: skip


async def cpu_per_poll(master, students, *, with_etag: bool) -> tuple[float, float]:
    """Server CPU ms per poll, and the share of polls answered 304."""
    clients = {}
    etags = {}
    for student in students[:50]:
        client = httpx.AsyncClient(cookies={"sessionid": student["session"]}, timeout=30)
        clients[student["job"]] = client
        etags[student["job"]] = (await client.get(poll_url(student))).headers["ETag"]
    queue = [students[i % 50] for i in range(CPU_POLLS)]
    answered = []

    async def one(student):
        headers = {"If-None-Match": etags[student["job"]]} if with_etag else {}
        answer = await clients[student["job"]].get(poll_url(student), headers=headers)
        answered.append(answer.status_code)

    before = workers_cpu_s(master)
    for start in range(0, len(queue), 8):
        await asyncio.gather(*(one(s) for s in queue[start : start + 8]))
    spent = workers_cpu_s(master) - before
    for client in clients.values():
        await client.aclose()
    return spent * 1000 / len(queue), answered.count(304) / len(answered)


async def class_watching(students, *, backoff: bool) -> dict:
    """Each student's page polls with the ETag it last got: every POLL_INTERVAL_S, or as
    static/js/job_detail.js does (1.5 x longer after each unchanged answer, up to 10 s)."""
    latencies, statuses = [], []
    limits = httpx.Limits(max_connections=STUDENTS, max_keepalive_connections=STUDENTS)
    # One client for the whole class (each page sends its own session cookie): a thousand
    # clients would spend the run building their TLS contexts.
    client = httpx.AsyncClient(timeout=30, limits=limits)
    deadline = time.monotonic() + WATCH_SECONDS

    async def page(student):
        etag, delay = None, POLL_INTERVAL_S
        await asyncio.sleep(random.uniform(0, POLL_INTERVAL_S))
        while time.monotonic() < deadline:
            started = time.monotonic()
            headers = {"Cookie": f"sessionid={student['session']}"}
            if etag:
                headers["If-None-Match"] = etag
            try:
                answer = await client.get(poll_url(student), headers=headers)
                statuses.append(answer.status_code)
                if answer.status_code == 200:
                    etag, delay = answer.headers["ETag"], POLL_INTERVAL_S
                    student["offset"] = answer.json()["logs"]["stdout"]["offset"]
                elif backoff:
                    delay = min(delay * 1.5, MAX_POLL_INTERVAL_S)
            except httpx.HTTPError:
                statuses.append(0)
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(max(delay - (time.monotonic() - started), 0))

    async def training():
        while time.monotonic() < deadline:
            for student in random.sample(students, STUDENTS // 20):
                with open(student["folder"] / "stdout.txt", "a") as log:
                    log.write(LOG_LINE)
            await asyncio.sleep(1)

    started, cpu = time.monotonic(), time.process_time()
    await asyncio.gather(training(), *(page(s) for s in students))
    elapsed = time.monotonic() - started
    client_cores = (time.process_time() - cpu) / elapsed
    await client.aclose()
    cuts = statistics.quantiles(latencies, n=100)
    return {"rps": len(statuses) / elapsed, "p50": cuts[49] * 1000, "p95": cuts[94] * 1000,
            "errors": sum(1 for s in statuses if s not in (200, 304)), "polls": len(statuses),
            "unchanged": statuses.count(304) / len(statuses), "client": client_cores}  # fmt: skip


def main() -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    server = None
    with tempfile.TemporaryDirectory(prefix="nightshift-polls-") as scratch:
        try:
            students = make_world(Path(scratch))
            connection.close()  # gunicorn's workers open their own
            server = serve_gunicorn(PORT, "--keep-alive", "75")
            full_ms, _ = asyncio.run(cpu_per_poll(server, students, with_etag=False))
            unchanged_ms, share = asyncio.run(cpu_per_poll(server, students, with_etag=True))
            assert share == 1.0, f"only {share:.0%} of the polls with an ETag were answered 304"
            every_2s = asyncio.run(class_watching(students, backoff=False))
            as_the_page = asyncio.run(class_watching(students, backoff=True))
        finally:
            if server is not None:
                server.terminate()
                server.wait(timeout=10)
            connection.creation.destroy_test_db(old_name, verbosity=0)

    print(f"\nNightshift status polls ({time.strftime('%Y-%m-%d %H:%M')}; gunicorn 2 workers x 4 "
          f"threads, {os.cpu_count()} cores shared with the client and PostgreSQL)\n")  # fmt: skip
    print("| poll | server CPU per poll |")
    print("| --- | --- |")
    print(f"| full document (200) | {full_ms:.2f} ms |")
    print(f"| unchanged, with its ETag (304) | {unchanged_ms:.2f} ms |")
    print(f"\n{STUDENTS:,} students watching for {WATCH_SECONDS} s, 5 % of the logs growing "
          "each second:\n")  # fmt: skip
    print("| polling | polls/s | p50 ms | p95 ms | answered 304 | errors | client's own CPU |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, run in (("every 2 s", every_2s), ("as the page does (2 s, backing off to 10 s)",
                                                 as_the_page)):  # fmt: skip
        print(
            f"| {name} | {run['rps']:.0f} | {run['p50']:.0f} | {run['p95']:.0f} | "
            f"{run['unchanged']:.0%} | {run['errors']} of {run['polls']:,} | "
            f"{run['client']:.2f} cores |"
        )
    print(
        f"poll unchanged / full: {unchanged_ms / full_ms:.2f} x CPU; "
        f"p95 with {STUDENTS:,} students: {as_the_page['p95']:.0f} ms"
    )


if __name__ == "__main__":
    main()
