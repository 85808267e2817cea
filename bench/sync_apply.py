"""The sync's applying of changes alone: 10,000 jobs' observations written to their rows,
events and usage records, in the sync's batches on one thread and on two, in one run.

Run with `make bench-sync-apply` (`ARGS="--jobs 20000 --repeat 7"`; `ARGS="--threads
1,2,3,4"` compares more thread counts). It needs PostgreSQL as `make test` does (no pool:
the observations are made here), makes and drops its own database, and alternates the ways
so that the machine's drift falls on each alike. Each round sets the jobs back to queued and
empties their timelines first, then applies one observation per job saying it is held:
every job changes, as in the 10,000-changed cycle of `make bench-sync-schedds`.

The last line reads `apply 10k changes, 2 threads / 1 thread: R x` (medians).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

from portal_setup import setup_django

setup_django(fake_bridge=True)

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from condor_bridge import JobObservation  # noqa: E402
from condor_bridge import JobState as Condor  # noqa: E402
from jobs import sync  # noqa: E402
from jobs.models import Job, JobEvent, JobState  # noqa: E402
from jobs.sync_compare import ActiveRows  # noqa: E402

HOLD_REASON = "submitted on hold at the user's request"


def make_jobs(count: int) -> None:
    user = get_user_model().objects.create_user("bench", password="bench-password-123")
    Job.objects.bulk_create(
        (
            Job(
                owner=user,
                name=f"apply {n}",
                state=JobState.QUEUED,
                request={"script_name": "train.py", "memory_mb": 256, "gpus": 8},
                output_dir="/nonexistent",
                cluster_id=1 + n // 20_000,
                proc_id=n % 20_000,
            )
            for n in range(count)
        ),
        batch_size=5000,
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def apply_once(threads: int, count: int) -> float:
    """One round: the jobs queued again with empty timelines, then all held; its seconds."""
    Job.objects.update(
        state=JobState.QUEUED,
        status_detail="",
        hold_reason="",
        hold_reason_code=None,
        hold_reason_subcode=None,
    )
    JobEvent.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE jobs_job")
        cursor.execute("VACUUM ANALYZE jobs_jobevent")
    rows = ActiveRows().read()
    observations = {
        row.pk: JobObservation(
            job_id=row.public_id,
            cluster_id=row.cluster_id,
            proc_id=row.proc_id,
            state=Condor.HELD,
            in_queue=True,
            hold_reason=HOLD_REASON,
            hold_reason_code=15,
            hold_reason_subcode=0,
        )
        for row in rows
    }
    as_read = {row.pk: row for row in rows}
    sync.APPLY_THREADS = threads
    started = time.perf_counter()
    changed = sync.jobs_apply_observations(observations, as_read=as_read)
    seconds = time.perf_counter() - started
    if len(changed) != count:
        raise SystemExit(f"{len(changed)} of {count} jobs changed")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", default="1,2", help="the thread counts to compare")
    args = parser.parse_args()
    counts = sorted({int(count) for count in args.threads.split(",")} | {1, 2})
    logging.getLogger("nightshift.jobs").setLevel(logging.WARNING)
    setup_test_environment()
    settings.DEBUG = False
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    seconds: dict[int, list[float]] = {count: [] for count in counts}
    try:
        make_jobs(args.jobs)
        apply_once(2, args.jobs)  # warm-up: the first round pays for cold caches
        for _ in range(args.repeat):
            for threads in counts:
                seconds[threads].append(apply_once(threads, args.jobs))
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)

    print(
        f"\nNightshift sync, applying {args.jobs:,} changes ({time.strftime('%Y-%m-%d %H:%M')},"
        f" {args.repeat} rounds each, alternated)"
    )
    for threads, times in seconds.items():
        listed = ", ".join(f"{t:.2f}" for t in times)
        print(
            f"  {threads} thread{'s' if threads > 1 else ''}: median "
            f"{statistics.median(times):.2f} s  ({listed})"
        )
    ratio = statistics.median(seconds[2]) / statistics.median(seconds[1])
    print(f"apply {args.jobs // 1000}k changes, 2 threads / 1 thread: {ratio:.2f} x")


if __name__ == "__main__":
    main()
