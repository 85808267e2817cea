"""Submit overhead: the portal's web and API against the personal pool, beside raw htcondor2.

Run with `make bench` (the pool, PostgreSQL and Redis must be up; `--singles 2 --batch 50` is
the quick mode make test runs, whose figures mean nothing). It creates its own
throw-away database, starts a real Celery worker, and prints its figures: one job from
POST to ClusterId (web and API), and a batch of 1,000 jobs through the API, each beside
raw htcondor2 submits of the same description. The numbers
are a measurement, not a test: compare them with the raw-htcondor2 floor of the same run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
import uuid
from pathlib import Path

from portal_setup import setup_django

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--singles", type=int, default=5, help="single jobs timed each way")
parser.add_argument("--batch", type=int, default=1000, help="jobs in the batch and the sweep")
ARGS = parser.parse_args()

REPO = setup_django(fake_bridge=False)

import htcondor2  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from raw_condor import (  # noqa: E402
    raw_description,
    raw_schedd,
    remove_instance_jobs,
    submit_bench_start,
)
from rest_framework.test import APIClient  # noqa: E402

from accounts.services import token_create  # noqa: E402
from jobs.models import Job  # noqa: E402

SLEEPER = "import time\ntime.sleep(600)\n"
BATCH = ARGS.batch
SINGLES = ARGS.singles


def post_job(client: Client, name: str) -> None:
    response = client.post(
        "/jobs/new/",
        {
            "name": name,
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 0.25,
            "arguments": "",
            "script": SimpleUploadedFile("train.py", SLEEPER.encode()),
        },
    )
    assert response.status_code == 302, response.content[:500]


def wait_until_assigned(count: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while Job.objects.filter(cluster_id__isnull=False).count() < count:
        if time.monotonic() > deadline:
            raise SystemExit(
                f"only {Job.objects.filter(cluster_id__isnull=False).count()} "
                f"of {count} jobs got a ClusterId within {timeout} s"
            )
        time.sleep(0.01)


def main() -> None:
    old_name, celery = submit_bench_start()
    figures: list[tuple[str, str]] = []
    scratch = Path(settings.JOBS_DIR) / f"bench-raw-{uuid.uuid4().hex[:8]}"
    try:
        celery.start_worker()
        user = get_user_model().objects.create_user("bench", password="bench-password-123")
        client = Client()
        client.force_login(user)

        # 1. One job: web POST until the worker has recorded its ClusterId.
        singles = []
        for i in range(SINGLES):
            started = time.perf_counter()
            post_job(client, f"single {i}")
            wait_until_assigned(i + 1)
            singles.append(time.perf_counter() - started)
        figures.append(
            (
                f"web POST -> ClusterId, 1 job (median of {SINGLES})",
                f"{statistics.median(singles) * 1000:.0f} ms",
            )
        )

        # 1b. The same through the API, beside one raw submit of the same description.
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, name='b').secret}")
        api_singles, raw_singles = [], []
        schedd = raw_schedd()
        for i in range(SINGLES):
            started = time.perf_counter()
            response = api.post(
                "/api/v1/jobs/",
                {
                    "name": f"api {i}",
                    "memory_gb": 0.25,
                    "script": SimpleUploadedFile("train.py", SLEEPER.encode()),
                },
                format="multipart",
            )
            assert response.status_code == 201, response.content[:500]
            wait_until_assigned(Job.objects.count())
            api_singles.append(time.perf_counter() - started)
            description = raw_description(Job.objects.first().directory)
            started = time.perf_counter()
            schedd.submit(htcondor2.Submit(description), count=1)
            raw_singles.append(time.perf_counter() - started)
        api_ms = statistics.median(api_singles) * 1000
        raw_ms = statistics.median(raw_singles) * 1000
        figures.append((f"API POST -> ClusterId, 1 job (median of {SINGLES})", f"{api_ms:.0f} ms"))
        figures.append(
            (f"raw htcondor2 Schedd.submit, 1 job (median of {SINGLES})", f"{raw_ms:.0f} ms")
        )
        figures.append(("single job: API minus raw", f"+{api_ms - raw_ms:.0f} ms"))

        # 2. A batch of 1,000 jobs through the API: POSTs in a row from one client, one
        # worker behind them, until all 1,000 have a ClusterId.
        already = Job.objects.count()
        started = time.perf_counter()
        for i in range(BATCH):
            response = api.post(
                "/api/v1/jobs/",
                {
                    "name": f"batch {i}",
                    "memory_gb": 0.25,
                    "script": SimpleUploadedFile("train.py", SLEEPER.encode()),
                },
                format="multipart",
            )
            assert response.status_code == 201, response.content[:500]
        posted = time.perf_counter() - started
        wait_until_assigned(already + BATCH, timeout=900)
        portal_batch = time.perf_counter() - started
        figures.append((f"{BATCH:,} API POSTs answered", f"{posted:.2f} s"))
        figures.append((f"{BATCH:,} jobs, API POST -> ClusterId (portal)", f"{portal_batch:.2f} s"))

        # 2b. The same batch as one sweep: one API POST with 1,000 parameter sets, until all
        # 1,000 runs have a ClusterId.
        already = Job.objects.count()
        started = time.perf_counter()
        response = api.post(
            "/api/v1/sweeps/",
            {
                "name": "batch sweep",
                "memory_gb": 0.25,
                "arguments": ["--index", "{i}"],
                "script": SimpleUploadedFile("train.py", SLEEPER.encode()),
                "parameters": json.dumps({"grid": {"i": list(range(BATCH))}}),
            },
            format="multipart",
        )
        assert response.status_code == 201, response.content[:500]
        sweep_posted = time.perf_counter() - started
        wait_until_assigned(already + BATCH, timeout=900)
        portal_sweep = time.perf_counter() - started
        figures.append((f"{BATCH:,}-run sweep, API POST answered", f"{sweep_posted:.2f} s"))
        figures.append(
            (f"{BATCH:,}-run sweep, API POST -> all ClusterIds", f"{portal_sweep:.2f} s")
        )

        # 3. The floors: the same 1,000 as raw submits of one job each, and as one raw
        # submit of one cluster with itemdata (what a batch can cost at best).
        directory = Job.objects.first().directory
        started = time.perf_counter()
        for _ in range(BATCH):
            schedd.submit(htcondor2.Submit(raw_description(directory)), count=1)
        raw_each = time.perf_counter() - started
        description = raw_description(directory)
        description["My.NightshiftJobId"] = '"$(jid)"'
        started = time.perf_counter()
        items = [{"jid": str(uuid.uuid4())} for _ in range(BATCH)]
        schedd.submit(htcondor2.Submit(description), itemdata=iter(items))
        raw_cluster = time.perf_counter() - started
        # What a raw user with a folder per job (as each portal run has) also pays: the
        # folders, the script in each, and their outputs folder, then one itemdata submit.
        started = time.perf_counter()
        items = []
        for n in range(BATCH):
            folder = scratch / str(n)
            (folder / "outputs").mkdir(parents=True)
            shutil.copyfile(directory / "train.py", folder / "train.py")
            items.append({"jid": str(uuid.uuid4()), "dir": str(folder)})
        description["initialdir"] = "$(dir)"
        schedd.submit(htcondor2.Submit(description), itemdata=iter(items))
        raw_folders = time.perf_counter() - started
        figures.append((f"{BATCH:,} jobs, raw Schedd.submit one by one", f"{raw_each:.2f} s"))
        figures.append(
            (f"{BATCH:,} jobs, raw Schedd.submit, one itemdata cluster", f"{raw_cluster:.2f} s")
        )
        figures.append(
            (
                f"{BATCH:,} jobs, raw: a folder each, then one itemdata cluster",
                f"{raw_folders:.2f} s",
            )
        )
        figures.append(("batch ratio portal / raw one by one", f"{portal_batch / raw_each:.1f} x"))
        figures.append(
            ("batch ratio portal / raw one cluster", f"{portal_batch / raw_cluster:.1f} x")
        )
        figures.append(
            ("sweep ratio portal / raw one cluster", f"{portal_sweep / raw_cluster:.1f} x")
        )
        figures.append(
            (
                "sweep ratio portal / raw one cluster with folders",
                f"{portal_sweep / raw_folders:.1f} x",
            )
        )
    finally:
        try:
            remove_instance_jobs()
            shutil.rmtree(scratch, ignore_errors=True)
        finally:
            celery.stop()
            connection.creation.destroy_test_db(old_name, verbosity=0)

    width = max(len(label) for label, _ in figures)
    print(f"\nNightshift submit overhead ({time.strftime('%Y-%m-%d %H:%M')})")
    for label, value in figures:
        print(f"  {label:<{width}}  {value:>10}")


if __name__ == "__main__":
    main()
