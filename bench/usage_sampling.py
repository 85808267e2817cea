"""Usage sampling with 10,000 running jobs: what one beat's sampling costs the portal.

Run with `make bench-usage` (PostgreSQL must be up). It creates its own throw-away database
with 10,000 running GPU jobs on the fake bridge, which reports HTCondor's figures for each
(the real bridge's one `Schedd.query` is measured by `make bench-sync`, beside the sync),
and times sampling cycles: the first (no earlier samples), the next ones (each job's
previous sample read in one query, to turn HTCondor's run averages into what the GPUs did
since), and summarising 1,000 jobs that ended. Each cycle's SQL statements are counted.
The sync itself does none of this: sampling is its own beat task.
"""

from __future__ import annotations

import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

from portal_setup import setup_django

setup_django(fake_bridge=True)

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from condor_bridge import JobRequest  # noqa: E402
from condor_bridge import JobState as CondorState  # noqa: E402
from jobs.bridge import get_bridge  # noqa: E402
from jobs.models import Job, JobState  # noqa: E402
from usage import services  # noqa: E402
from usage.models import UsageSample  # noqa: E402

# --quick: a few hundred jobs, for make test (tests/bench), which checks it still runs.
QUICK = "--quick" in sys.argv[1:]
JOBS = 300 if QUICK else 10_000
ENDED = 50 if QUICK else 1_000
T0 = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)


def counted(call):
    statements = [0]

    def count(execute, sql, params, many, context):
        statements[0] += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        started = time.perf_counter()
        result = call()
        seconds = time.perf_counter() - started
    return result, seconds, statements[0]


def main() -> None:
    setup_test_environment()
    settings.DEBUG = False
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    figures = []
    try:
        bridge = get_bridge()
        user = get_user_model().objects.create_user("bench", password="bench-password-123")
        ids = [str(uuid.uuid4()) for _ in range(JOBS)]
        Job.objects.bulk_create(
            (
                Job(
                    public_id=jid,
                    owner=user,
                    name=f"usage {n}",
                    state=JobState.RUNNING,
                    gpus=2,
                    request={"script_name": "train.py", "memory_mb": 8192, "gpus": 2, "cpus": 4},
                    output_dir="/nonexistent",
                    cluster_id=1,
                    proc_id=n,
                    started_at=T0,
                )
                for n, jid in enumerate(ids)
            ),
            batch_size=2000,
        )
        for jid in ids:
            request = JobRequest(
                job_id=jid,
                job_dir="/nonexistent",
                script_name="train.py",
                gpus=2,
                cpus=4,
                memory_mb=8192,
            )
            bridge.submit(request, check_existing=False)
            bridge.set_state(jid, CondorState.RUNNING, at=T0)
            bridge.set_usage(
                jid,
                cpus_used=1.5,
                memory_mb=3000,
                memory_peak_mb=3100,
                disk_mb=40,
                gpus_used=0.7,
                gpu_memory_peak_mb=9000,
            )
        for cycle in range(3):
            now = T0 + timedelta(minutes=cycle + 1)
            written, seconds, sql = counted(lambda now=now: services.usage_sample_running(now=now))
            label = "first sampling" if cycle == 0 else f"sampling {cycle + 1}"
            figures.append((f"{label}: {written:,} running jobs", f"{seconds:.2f} s", str(sql)))
        ended = ids[:ENDED]
        Job.objects.filter(public_id__in=ended).update(
            state=JobState.COMPLETED, finished_at=T0 + timedelta(minutes=4)
        )
        for jid in ended:
            bridge.set_state(jid, CondorState.COMPLETED, at=T0 + timedelta(minutes=4), exit_code=0)
        done, seconds, sql = counted(
            lambda: services.usage_summarise_finished(now=T0 + timedelta(minutes=20))
        )
        figures.append(
            (
                f"summarising {done:,} ended jobs (batches of {services.SUMMARISE_BATCH})",
                f"{seconds:.2f} s",
                str(sql),
            )
        )
        figures.append(("samples kept", f"{UsageSample.objects.count():,}", ""))
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    headers = ("figure", "wall", "SQL")
    widths = [max(len(row[i]) for row in [headers, *figures]) for i in range(3)]
    print(f"\nNightshift usage sampling ({time.strftime('%Y-%m-%d %H:%M')})")
    for row in [headers, *figures]:
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
