"""One sync cycle with its active jobs spread over two schedds, beside raw parallel
htcondor2 queries of both.

Run with `make bench-sync-schedds` (`ARGS="--jobs 100000"` for the issue's campus figure;
the default is 20,000). It turns on the personal pool's second schedd (`pool schedds 2`),
makes its own throw-away database, submits half the held jobs to each schedd in one raw
itemdata submit apiece, gives the portal a row for each (its schedd recorded), and times
sync cycles: every job changed, nothing changed, and 10,000 changed. The floor is one raw
`Schedd.query` of each schedd with the same projection, the two run in parallel threads,
as the sync asks them; the "ask" phase in the table of each cycle's phases is what to set
beside it. The pool goes back to one schedd at the end.

The last line reads `sync 2 schedds, nothing changed / raw parallel query: R x`.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from portal_setup import REPO, setup_django

setup_django(fake_bridge=False)

import htcondor2  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from sync_scale import (  # noqa: E402
    held_description,
    instance_constraint,
    print_phases,
    timed_sync,
)

from condor_bridge.states import PROJECTION  # noqa: E402
from jobs.bridge import get_bridge  # noqa: E402
from jobs.models import Job, JobState  # noqa: E402

POOL = str(REPO / "deploy" / "personal-pool" / "pool")
CHANGED = 10_000


def pool_schedds(count: int) -> list[str]:
    done = subprocess.run(
        [POOL, "schedds", str(count)], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.split()


def raw_schedds(names: list[str]) -> dict[str, htcondor2.Schedd]:
    get_bridge()  # sets the portal's token directory and collector for raw calls too
    collector = htcondor2.Collector(settings.CONDOR_COLLECTOR)
    return {
        name: htcondor2.Schedd(collector.locate(htcondor2.DaemonType.Schedd, name))
        for name in names
    }


# The schedd takes at most MAX_JOBS_PER_SUBMISSION (20,000 by default) jobs in one cluster.
CLUSTER_SIZE = 20_000


def submit_held(schedd: htcondor2.Schedd, ids: list[str], directory) -> list[tuple[int, int]]:
    """Held jobs with these Nightshift ids, in clusters of at most CLUSTER_SIZE: each id's
    (ClusterId, ProcId), in order."""
    description = held_description(directory)
    placed = []
    for start in range(0, len(ids), CLUSTER_SIZE):
        chunk = ids[start : start + CLUSTER_SIZE]
        result = schedd.submit(
            htcondor2.Submit(description), itemdata=iter([{"jid": j} for j in chunk])
        )
        placed += [(result.cluster(), proc) for proc in range(len(chunk))]
    return placed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--profile", action="store_true")
    jobs = parser.parse_args().jobs
    # One line per job that changed would bury the figures.
    logging.getLogger("nightshift.jobs").setLevel(logging.WARNING)
    names = pool_schedds(2)
    settings.CONDOR_SCHEDDS, settings.CONDOR_SCHEDD_NAME = names, names[0]
    setup_test_environment()
    settings.DEBUG = False
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    schedds = raw_schedds(names)
    figures: list[tuple[str, ...]] = []
    try:
        user = get_user_model().objects.create_user("bench", password="bench-password-123")
        directory = settings.JOBS_DIR / "bench-sync-schedds"
        directory.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        for index, name in enumerate(names):
            ids = [str(uuid.uuid4()) for _ in range(jobs // len(names))]
            placed = submit_held(schedds[name], ids, directory)
            Job.objects.bulk_create(
                (
                    Job(
                        public_id=jid,
                        owner=user,
                        name=f"sync {n}",
                        state=JobState.IDLE,
                        request={"script_name": "train.py", "memory_mb": 256, "gpus": 8},
                        output_dir=str(directory),
                        cluster_id=cluster,
                        proc_id=proc,
                        schedd=name,
                    )
                    for n, (jid, (cluster, proc)) in enumerate(zip(ids, placed, strict=True))
                ),
                batch_size=5000,
            )
            print(
                f"{name}: {len(ids):,} held jobs; {index + 1} of "
                f"{len(names)} after {time.perf_counter() - started:.0f} s"
            )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")

        timed_sync(f"sync, {jobs:,} active on 2 schedds, all changed", figures)
        nothing = []
        for _ in range(3):
            started = time.perf_counter()
            timed_sync(f"sync, {jobs:,} active on 2 schedds, nothing changed", figures)
            nothing.append(time.perf_counter() - started)
        # 10,000 changed in the portal's view (half on each schedd): back to queued.
        for name in names:
            pks = list(
                Job.objects.filter(schedd=name)
                .order_by("pk")
                .values_list("pk", flat=True)[: CHANGED // len(names)]
            )
            Job.objects.filter(pk__in=pks).update(state=JobState.QUEUED)
        timed_sync(f"sync, {jobs:,} active on 2 schedds, {CHANGED:,} changed", figures)

        def query(name: str) -> int:
            return len(schedds[name].query(constraint=instance_constraint(), projection=PROJECTION))

        floors = []
        with ThreadPoolExecutor(max_workers=len(names)) as pool:
            for _ in range(3):
                started = time.perf_counter()
                found = sum(pool.map(query, names))
                floors.append(time.perf_counter() - started)
        figures.append(
            (
                f"raw htcondor2 Schedd.query of both schedds in parallel, {found:,} "
                "jobs (best of 3)",
                f"{min(floors):.2f} s",
                "0",
                "Schedd.query 2",
            )
        )
    finally:
        try:
            for schedd in schedds.values():
                schedd.act(htcondor2.JobAction.Remove, instance_constraint())
        finally:
            connection.creation.destroy_test_db(old_name, verbosity=0)
            pool_schedds(1)

    headers = ("figure", "wall", "SQL", "HTCondor calls")
    widths = [max(len(row[i]) for row in [headers, *figures]) for i in range(4)]
    print(f"\nNightshift sync over two schedds ({time.strftime('%Y-%m-%d %H:%M')})")
    for row in [headers, *figures]:
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    print_phases()
    print(
        f"sync 2 schedds, nothing changed / raw parallel query: {min(nothing) / min(floors):.2f} x"
    )


if __name__ == "__main__":
    main()
