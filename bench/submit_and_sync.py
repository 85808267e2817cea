"""Baseline: portal submit and sync against the personal pool, beside raw htcondor2.

Run with `make bench` (the pool, PostgreSQL and Redis must be up). It creates its own
throw-away database, starts a real Celery worker, and prints its figures. The numbers
are a measurement, not a test: compare them with the raw-htcondor2 floor of the same run.
"""

from __future__ import annotations

import statistics
import time
import uuid
from pathlib import Path

from portal_setup import setup_django

REPO = setup_django(fake_bridge=False)

import htcondor2  # noqa: E402
import redis  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from condor_bridge.submit import build_submit_description  # noqa: E402
from condor_bridge.types import FileMode, JobRequest  # noqa: E402
from jobs import services  # noqa: E402
from jobs.bridge import get_bridge  # noqa: E402
from jobs.models import Job, JobState  # noqa: E402
from tests.pipeline import CeleryProcesses  # noqa: E402

SLEEPER = "import time\ntime.sleep(600)\n"


def post_job(client: Client, name: str) -> None:
    response = client.post(
        "/jobs/new/",
        {"name": name, "gpus": 0, "cpus": 1, "memory_gb": 0.25, "arguments": "",
         "script": SimpleUploadedFile("train.py", SLEEPER.encode())},
    )  # fmt: skip
    assert response.status_code == 302, response.content[:500]


def wait_until_assigned(count: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while Job.objects.filter(cluster_id__isnull=False).count() < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {Job.objects.filter(cluster_id__isnull=False).count()} "
                             f"of {count} jobs got a ClusterId within {timeout} s")  # fmt: skip
        time.sleep(0.01)


def raw_schedd() -> htcondor2.Schedd:
    get_bridge()  # sets the portal's token directory and collector for raw calls too
    collector = htcondor2.Collector(settings.CONDOR_COLLECTOR)
    return htcondor2.Schedd(collector.locate(htcondor2.DaemonType.Schedd))


def remove_instance_jobs() -> None:
    raw_schedd().act(
        htcondor2.JobAction.Remove, f'NightshiftInstance == "{settings.NIGHTSHIFT_INSTANCE}"'
    )


def raw_description(directory: Path) -> dict[str, str]:
    request = JobRequest(job_id=str(uuid.uuid4()), job_dir=str(directory),
                         script_name="train.py", memory_mb=256)  # fmt: skip
    return build_submit_description(
        request, mode=FileMode.SHARED, instance=settings.NIGHTSHIFT_INSTANCE
    )


def main() -> None:
    setup_test_environment()
    settings.DEBUG = False
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    log_dir = Path(settings.VAR_DIR) / "bench"
    log_dir.mkdir(parents=True, exist_ok=True)
    celery = CeleryProcesses(log_dir)
    celery.env["NIGHTSHIFT_SYNC_INTERVAL"] = "3600"  # keep sync out of the submit timings
    figures: list[tuple[str, str]] = []
    try:
        celery.start_worker()
        user = get_user_model().objects.create_user("bench", password="bench-password-123")
        client = Client()
        client.force_login(user)

        # 1. One job: web POST until the worker has recorded its ClusterId.
        singles = []
        for i in range(5):
            started = time.perf_counter()
            post_job(client, f"single {i}")
            wait_until_assigned(i + 1)
            singles.append(time.perf_counter() - started)
        figures.append(("web POST -> ClusterId, 1 job (median of 5)",
                        f"{statistics.median(singles) * 1000:.0f} ms"))  # fmt: skip

        # 2. 100 jobs through the portal: 100 POSTs, one worker, until all have ClusterIds.
        already = Job.objects.count()
        started = time.perf_counter()
        for i in range(100):
            post_job(client, f"batch {i}")
        posted = time.perf_counter() - started
        wait_until_assigned(already + 100)
        portal_100 = time.perf_counter() - started
        figures.append(("100 web POSTs answered", f"{posted:.2f} s"))
        figures.append(("100 jobs, web POST -> ClusterId (portal)", f"{portal_100:.2f} s"))

        # 3. The floor: 100 raw htcondor2 submits, one job each, same description.
        directory = Job.objects.first().directory
        schedd = raw_schedd()
        started = time.perf_counter()
        for _ in range(100):
            schedd.submit(htcondor2.Submit(raw_description(directory)), count=1)
        raw_100 = time.perf_counter() - started
        figures.append(("100 jobs, raw htcondor2 Schedd.submit", f"{raw_100:.2f} s"))
        figures.append(("ratio portal / raw", f"{portal_100 / raw_100:.1f} x"))
        remove_instance_jobs()
        time.sleep(2)

        # 4. One sync cycle with 1,000 active jobs (held, so they stay in the queue).
        Job.objects.all().delete()
        description = raw_description(directory)
        description["My.NightshiftJobId"] = '"$(jid)"'
        description["hold"] = "true"
        ids = [str(uuid.uuid4()) for _ in range(1000)]
        submit = htcondor2.Submit(description)
        started = time.perf_counter()
        result = schedd.submit(submit, itemdata=iter([{"jid": jid} for jid in ids]))
        figures.append(("1,000 held jobs, one raw itemdata submit",
                        f"{time.perf_counter() - started:.2f} s"))  # fmt: skip
        Job.objects.bulk_create(
            Job(public_id=jid, owner=user, name=f"sync {n}", state=JobState.IDLE,
                request={"script_name": "train.py", "memory_mb": 256},
                output_dir=str(directory), cluster_id=result.cluster(), proc_id=n)
            for n, jid in enumerate(ids)
        )  # fmt: skip
        started = time.perf_counter()
        report = services.jobs_sync()
        first = time.perf_counter() - started
        started = time.perf_counter()
        steady = services.jobs_sync()
        second = time.perf_counter() - started
        started = time.perf_counter()
        ads = raw_schedd().query(
            constraint=f'NightshiftInstance == "{settings.NIGHTSHIFT_INSTANCE}"',
            projection=["NightshiftJobId", "JobStatus", "ClusterId", "ProcId"],
        )
        raw_query = time.perf_counter() - started
        figures.append((f"sync, 1,000 active, all changed ({report.changed} rows + events)",
                        f"{first:.2f} s"))  # fmt: skip
        figures.append((f"sync, 1,000 active, nothing changed ({steady.changed} rows)",
                        f"{second:.3f} s"))  # fmt: skip
        figures.append((f"raw htcondor2 query of the same {len(ads)} jobs", f"{raw_query:.3f} s"))
    finally:
        try:
            remove_instance_jobs()
        finally:
            celery.stop()
            connection.creation.destroy_test_db(old_name, verbosity=0)

    width = max(len(label) for label, _ in figures)
    print(f"\nNightshift submit and sync baseline ({time.strftime('%Y-%m-%d %H:%M')})")
    for label, value in figures:
        print(f"  {label:<{width}}  {value:>10}")


if __name__ == "__main__":
    main()
