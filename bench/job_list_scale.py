"""The job list with 100,000 jobs in the database, across 500 users.

A heavy user owns 20,000 of them; the other 80,000 belong to 499 others. For the heavy
user this times the web page `/jobs/` and `GET /api/v1/jobs/` (first page, a later page,
a state filter), p50 and p95 of 60 requests each, and counts the SQL queries of each
request, beside the floor: the same page of rows straight from PostgreSQL. It also checks
that the query count does not grow with the user's number of jobs (a user with 10 jobs).

Run with `make bench-list` (PostgreSQL and Redis must be up; HTCondor is not needed).
"""

from __future__ import annotations

import sys
import time

from portal_setup import setup_django

REPO = setup_django(fake_bridge=True)

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402
from timing import percentile, samples_ms  # noqa: E402

from accounts.services import token_create  # noqa: E402
from jobs.models import Job, JobState  # noqa: E402

# --quick: a few thousand jobs, for make test (tests/bench), which checks it still runs.
QUICK = "--quick" in sys.argv[1:]
TOTAL_JOBS, USERS, HEAVY_JOBS = (3_000, 20, 1_000) if QUICK else (100_000, 500, 20_000)
REPEATS = 3 if QUICK else 60
LATER_PAGE = 20 if QUICK else 300
STATES = [JobState.COMPLETED] * 6 + [
    JobState.FAILED,
    JobState.RUNNING,
    JobState.IDLE,
    JobState.HELD,
]
REQUEST = {
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


def make_world():
    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"user{i:03d}") for i in range(USERS)]
    )
    heavy, light = users[0], users[1]
    owners = (
        [heavy] * HEAVY_JOBS
        + [users[2 + i % (USERS - 2)] for i in range(TOTAL_JOBS - HEAVY_JOBS - 10)]
        + [light] * 10
    )
    Job.objects.bulk_create(
        [
            Job(
                owner=owner,
                name=f"resnet sweep {i}",
                request=REQUEST,
                state=STATES[i % 10],
                output_dir=f"/nonexistent/{i}",
                cluster_id=i + 1,
                proc_id=0,
                workstation="ws-ampere",
            )
            for i, owner in enumerate(owners)
        ],
        batch_size=5000,
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
    return heavy, light


def raw_page(user_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT * FROM jobs_job WHERE owner_id = %s ORDER BY created_at DESC, id DESC LIMIT 25",
            [user_id],
        )
        cursor.fetchall()


def queries_of(action) -> int:
    with CaptureQueriesContext(connection) as captured:
        action()
    return len(captured)


def main() -> None:
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        started = time.perf_counter()
        heavy, light = make_world()
        print(
            f"created {TOTAL_JOBS:,} jobs for {USERS} users in "
            f"{time.perf_counter() - started:.1f} s"
        )

        def clients(user):
            web = Client()
            web.force_login(user)
            api = APIClient()
            api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, name='b').secret}")
            return web, api

        def ok(response):
            assert response.status_code == 200, response.content[:300]

        (web, api), (light_web, light_api) = clients(heavy), clients(light)
        cases = [
            ("raw SQL, newest 25 rows (floor)", lambda: raw_page(heavy.pk), None),
            ("web /jobs/", lambda: ok(web.get("/jobs/")), lambda: ok(light_web.get("/jobs/"))),
            (
                f"web /jobs/?page={LATER_PAGE}",
                lambda: ok(web.get("/jobs/", {"page": LATER_PAGE})),
                None,
            ),
            ("web /jobs/?state=held", lambda: ok(web.get("/jobs/", {"state": "held"})), None),
            (
                "GET /api/v1/jobs/",
                lambda: ok(api.get("/api/v1/jobs/")),
                lambda: ok(light_api.get("/api/v1/jobs/")),
            ),
            (
                f"GET /api/v1/jobs/?page={LATER_PAGE}",
                lambda: ok(api.get("/api/v1/jobs/", {"page": LATER_PAGE})),
                None,
            ),
            (
                "GET /api/v1/jobs/?state=held",
                lambda: ok(api.get("/api/v1/jobs/", {"state": "held"})),
                None,
            ),
        ]
        print(
            f"\n{TOTAL_JOBS:,} jobs, {USERS} users; the heavy user owns {HEAVY_JOBS:,}; "
            f"{REPEATS} requests each:\n"
        )
        print("| request | p50 ms | p95 ms | SQL queries (heavy user) | (user with 10 jobs) |")
        print("| --- | --- | --- | --- | --- |")
        for label, action, light_action in cases:
            times = samples_ms(action, REPEATS)
            queries = queries_of(action) if "raw" not in label else 1
            light_queries = queries_of(light_action) if light_action else "-"
            print(
                f"| {label} | {percentile(times, 0.5):.1f} | {percentile(times, 0.95):.1f} "
                f"| {queries} | {light_queries} |"
            )
    finally:
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
