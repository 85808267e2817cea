"""The web under load: Locust against gunicorn, as `make run` starts it, on this machine.

Run with `make bench-load` (PostgreSQL and Redis must be up; HTCondor is not needed: the
pages read the database and the job folders). It creates a throw-away database with 200
students and 10,000 jobs (each student's newest 20 jobs have a 50 KB log in a job folder),
starts gunicorn with `make run`'s settings (2 workers of 4 threads), and runs Locust
headless in steps of more and more simultaneous students, each requesting without pause:
the job list (30 %), a job page (20 %) and the status-and-log-tail poll of an open job
page (50 %). Each step prints requests per second, p50, p95 and the error count; the
figure to read is the highest rate whose p95 stays under 250 ms with no errors. Locust
runs on the same 2 cores as gunicorn and PostgreSQL, so the rates are a floor.

`--quick` (what `make test` runs, tests/bench): 20 students with 20 jobs each, two steps of
3 s (1 and 4 students); the same pages, the same table.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from portal_setup import Gunicorn, serve_gunicorn, setup_django

REPO = setup_django(fake_bridge=True)

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from jobs.models import Job, JobState  # noqa: E402

QUICK = "--quick" in sys.argv[1:]
STUDENTS, JOBS_EACH, WITH_LOGS = (20, 20, 5) if QUICK else (200, 50, 20)
STEPS = (1, 4) if QUICK else (1, 2, 4, 8, 16, 32)
STEP_SECONDS = 3 if QUICK else 20
STATES = [JobState.COMPLETED] * 5 + [JobState.RUNNING] * 3 + [JobState.IDLE, JobState.HELD]
REQUEST = {
    "script_name": "train.py",
    "arguments": ["--epochs", "5"],
    "gpus": 1,
    "cpus": 2,
    "memory_mb": 4096,
    "output_paths": ["outputs"],
}
LOG_LINE = "epoch 3 step 1200 loss 0.4182 lr 0.00030 throughput 412.5 samples/s\n"


def make_world(folder: Path) -> list[dict]:
    """Students, their jobs, and a session and the watched jobs of each, for Locust."""
    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"student{i:03d}") for i in range(STUDENTS)]
    )
    log = LOG_LINE * (50_000 // len(LOG_LINE))
    jobs = []
    for user in users:
        for n in range(JOBS_EACH):
            directory = folder / f"{user.username}-{n}"
            if n >= JOBS_EACH - WITH_LOGS:
                directory.mkdir()
                (directory / "stdout.txt").write_text(log)
            jobs.append(
                Job(
                    owner=user,
                    name=f"resnet lr sweep {n}",
                    request=REQUEST,
                    state=STATES[n % len(STATES)],
                    output_dir=str(directory),
                    cluster_id=len(jobs) + 1,
                    proc_id=0,
                    workstation="ws-ampere",
                    gpu_model="NVIDIA A100-SXM4-40GB",
                )
            )
    Job.objects.bulk_create(jobs, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    students = []
    for user in users:
        client = Client()
        client.force_login(user)
        watched = Job.objects.filter(owner=user).order_by("-id")[:WITH_LOGS]
        students.append(
            {
                "session": client.cookies["sessionid"].value,
                "jobs": [{"id": str(job.public_id), "log_size": len(log)} for job in watched],
            }
        )
    return students


def warm_up(server: Gunicorn, students: list[dict], rounds: int = 4) -> None:
    """Each page asked a few times before any step, so that both workers have loaded their
    templates and connections: a step measures a warm server, not its first requests (on a
    busy machine those took a whole quick step, which then had no answer to report)."""
    import httpx

    student = students[0]
    job = student["jobs"][0]["id"]
    with httpx.Client(base_url=server.url, cookies={"sessionid": student["session"]}) as client:
        for _ in range(rounds):
            for path in ("/jobs/", f"/jobs/{job}/", f"/jobs/{job}/status.json"):
                client.get(path, timeout=60).raise_for_status()


def milliseconds(value: str) -> float | None:
    """A Locust percentile; None where the step had no request of that kind (N/A)."""
    return None if value == "N/A" else float(value)


def locust_step(server: Gunicorn, users: int, data: Path, out: Path) -> dict[str, dict]:
    prefix = out / f"step-{users}"
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("locust")),
            "-f",
            str(REPO / "bench" / "locustfile.py"),
            "--headless",
            "--host",
            server.url,
            "--users",
            str(users),
            "--spawn-rate",
            str(users),
            "--run-time",
            f"{STEP_SECONDS}s",
            "--csv",
            str(prefix),
            "--only-summary",
            "--loglevel",
            "WARNING",
        ],
        env=os.environ | {"NIGHTSHIFT_LOAD_DATA": str(data)},
        # Locust exits 1 when a request failed: the table counts those.
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if not Path(f"{prefix}_stats.csv").exists():
        raise SystemExit(f"locust wrote no figures:\n{done.stderr[-3000:]}")
    with open(f"{prefix}_stats.csv") as stats:
        rows = {row["Name"]: row for row in csv.DictReader(stats)}
    figures = {}
    for name, row in rows.items():
        figures[name] = {
            "rps": float(row["Requests/s"]),
            "p50": milliseconds(row["50%"]),
            "p95": milliseconds(row["95%"]),
            "errors": int(row["Failure Count"]),
            "requests": int(row["Request Count"]),
        }
    return figures


def shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def main() -> None:
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    server = None
    with tempfile.TemporaryDirectory(prefix="nightshift-load-") as scratch:
        folder = Path(scratch)
        try:
            started = time.perf_counter()
            students = make_world(folder)
            print(
                f"created {STUDENTS} students and {STUDENTS * JOBS_EACH:,} jobs "
                f"in {time.perf_counter() - started:.1f} s"
            )
            data = folder / "students.json"
            data.write_text(json.dumps(students))
            connection.close()  # gunicorn's workers open their own
            server = serve_gunicorn()
            warm_up(server, students)
            results = [(users, locust_step(server, users, data, folder)) for users in STEPS]
        finally:
            if server is not None:
                server.stop()
            connection.creation.destroy_test_db(old_name, verbosity=0)

    print(
        f"\nNightshift web under load ({time.strftime('%Y-%m-%d %H:%M')}; "
        f"{STEP_SECONDS} s per step, gunicorn 2 workers x 4 threads)\n"
    )
    print("| students | requests/s | p50 ms | p95 ms | errors | p95 list / job / status ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    best = None
    for users, figures in results:
        total = figures["Aggregated"]
        parts = " / ".join(
            shown(figures.get(name, {}).get("p95"))
            for name in ("/jobs/", "/jobs/<id>/", "/jobs/<id>/status.json")
        )
        print(
            f"| {users} | {total['rps']:.1f} | {shown(total['p50'])} | {shown(total['p95'])} | "
            f"{total['errors']} of {total['requests']:,} | {parts} |"
        )
        if total["p95"] is not None and total["p95"] < 250 and total["errors"] == 0:
            best = max(best or 0, total["rps"])
    print(
        f"\nhighest rate with p95 < 250 ms and no errors: {best:.1f} requests/s"
        if best
        else "\nno step kept p95 under 250 ms"
    )


if __name__ == "__main__":
    main()
