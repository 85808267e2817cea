"""Raw htcondor2, the floor the benchmarks measure the portal against: the schedd the portal
uses, the description it would submit, and the removal of a benchmark's jobs. Import it
after portal_setup.setup_django()."""

from __future__ import annotations

import uuid
from pathlib import Path

import htcondor2
from django.conf import settings

from condor_bridge.submit import build_submit_description
from condor_bridge.types import FileMode, JobRequest
from jobs.bridge import get_bridge


def raw_schedd() -> htcondor2.Schedd:
    get_bridge()  # sets the portal's token directory and collector for raw calls too
    collector = htcondor2.Collector(settings.CONDOR_COLLECTOR)
    return htcondor2.Schedd(collector.locate(htcondor2.DaemonType.Schedd))


def remove_instance_jobs() -> None:
    raw_schedd().act(
        htcondor2.JobAction.Remove, f'NightshiftInstance == "{settings.NIGHTSHIFT_INSTANCE}"'
    )


def raw_description(directory: Path) -> dict[str, str]:
    request = JobRequest(
        job_id=str(uuid.uuid4()), job_dir=str(directory), script_name="train.py", memory_mb=256
    )
    return build_submit_description(
        request, mode=FileMode.SHARED, instance=settings.NIGHTSHIFT_INSTANCE
    )


def submit_bench_start():
    """What the submit benchmarks share: their own test database and Redis, the API's
    submission limit lifted (they measure what a submission costs, not that limit), and a
    real Celery worker's processes (not started) with the sync kept out of the timings.
    Returns the old database name (for destroy_test_db) and the worker's processes."""
    import redis
    from django.db import connection
    from django.test.utils import setup_test_environment

    from tests.pipeline import CeleryProcesses

    setup_test_environment()
    settings.DEBUG = False
    settings.API_THROTTLE_RATES = {**settings.API_THROTTLE_RATES, "submissions": "100000/minute"}
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    log_dir = Path(settings.VAR_DIR) / "bench"
    log_dir.mkdir(parents=True, exist_ok=True)
    celery = CeleryProcesses(log_dir)
    celery.env["NIGHTSHIFT_SYNC_INTERVAL"] = "3600"
    return old_name, celery
