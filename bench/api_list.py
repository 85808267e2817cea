"""How fast the API and the CLI list a student's jobs when they have 10,000 of them.

Open OnDemand's active-jobs page takes 5-30 s at 10k jobs. This creates 10,000 jobs for
one user in a throw-away PostgreSQL database, then times:

- the floor: the same page of rows straight from PostgreSQL (one SELECT);
- GET /api/v1/jobs/ (first page of 25, a page of 200, filtered by state and by name);
- `nightshift list` as a user runs it, against a gunicorn serving this database.

Run with `make bench-api` (PostgreSQL and Redis must be up; HTCondor is not needed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from portal_setup import serve_gunicorn, setup_django

REPO = setup_django(fake_bridge=True)

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402
from timing import median_ms  # noqa: E402

from accounts.services import token_create  # noqa: E402
from jobs.models import Job, JobState  # noqa: E402

# --quick: a few hundred jobs, for make test (tests/bench), which checks it still runs.
QUICK = "--quick" in sys.argv[1:]
JOBS = 300 if QUICK else 10_000
REPEATS = 2 if QUICK else 9
LAST_PAGE = 12 if QUICK else 400
STATES = [JobState.COMPLETED] * 6 + [
    JobState.FAILED,
    JobState.RUNNING,
    JobState.IDLE,
    JobState.HELD,
]


def make_jobs(user) -> None:
    request = {
        "script_name": "train.py",
        "arguments": ["--epochs", "5"],
        "environment": [],
        "gpus": 1,
        "gpu_memory_gb": 10,
        "gpu_capability": None,
        "cpus": 2,
        "memory_mb": 4096,
        "max_runtime_s": None,
        "output_paths": ["outputs"],
        "python": "/usr/bin/python3",
        "container_image": None,
    }
    Job.objects.bulk_create(
        [
            Job(
                owner=user,
                name=f"resnet sweep {i}",
                request=request,
                state=STATES[i % 10],
                output_dir=f"/nonexistent/{i}",
                cluster_id=i + 1,
                proc_id=0,
                workstation="ws-ampere",
            )
            for i in range(JOBS)
        ],
        batch_size=2000,
    )


def raw_page() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT * FROM jobs_job WHERE owner_id = %s ORDER BY created_at DESC, id DESC LIMIT 25",
            [USER_ID],
        )
        cursor.fetchall()


USER_ID = 0


def main() -> None:
    global USER_ID
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    server = None
    try:
        user = get_user_model().objects.create_user("bench", password="a-long-bench-password")
        USER_ID = user.pk
        started = time.perf_counter()
        make_jobs(user)
        print(f"created {JOBS:,} jobs in {time.perf_counter() - started:.1f} s")
        secret = token_create(user=user, name="bench").secret
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")

        def get(**params):
            response = api.get("/api/v1/jobs/", params)
            assert response.status_code == 200, response.content[:300]

        rows = [
            ("raw SQL, newest 25 rows (floor)", median_ms(raw_page, REPEATS)),
            ("GET /api/v1/jobs/ (25 per page)", median_ms(get, REPEATS)),
            ("GET /api/v1/jobs/?page_size=200", median_ms(lambda: get(page_size=200), REPEATS)),
            ("GET /api/v1/jobs/?state=held", median_ms(lambda: get(state="held"), REPEATS)),
            ("GET /api/v1/jobs/?name=sweep 99", median_ms(lambda: get(name="sweep 99"), REPEATS)),
            (
                f"GET /api/v1/jobs/?page={LAST_PAGE}",
                median_ms(lambda: get(page=LAST_PAGE), REPEATS),
            ),
        ]
        connection.close()  # gunicorn's workers open their own
        server = serve_gunicorn()
        cli = [str(Path(sys.executable).with_name("nightshift")), "list"]
        env = os.environ | {"NIGHTSHIFT_URL": server.url, "NIGHTSHIFT_TOKEN": secret}

        def run_cli():
            subprocess.run(cli, env=env, check=True, capture_output=True)

        rows.append(
            ("`nightshift list` end to end (process start included)", median_ms(run_cli, repeats=5))
        )
        print(f"\n{JOBS:,} jobs of one user; median of {REPEATS} (CLI: 5):\n")
        print("| figure | ms |\n| --- | --- |")
        for label, value in rows:
            print(f"| {label} | {value:.1f} |")
    finally:
        if server is not None:
            server.stop()
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
