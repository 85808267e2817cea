"""One sync cycle with 10,000 active jobs in the real queue, beside raw htcondor2.

Run with `make bench-sync` (the pool and PostgreSQL must be up; `ARGS=--profile` adds a
pyinstrument profile of each cycle; `--jobs 500` is the quick mode make test runs, whose
figures mean nothing). It creates its own throw-away database, submits
10,000 held jobs to the personal pool in one raw itemdata submit, gives the portal a row
for each, and times sync cycles: when every job changed, when a tenth did (some of them
having left the queue), and when none did. Each cycle's schedd and collector calls and
SQL queries are counted, and a second table gives each cycle's phases (`SyncReport.phases`:
read, ask, compare, apply, housekeeping). The floor is one raw `Schedd.query` of the same
jobs with the same projection.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager

from portal_setup import setup_django

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--jobs", type=int, default=10_000)
parser.add_argument("--profile", action="store_true", help="a pyinstrument profile of each cycle")
# Run as a script only: sync_schedds and bindings_gil import its helpers, with their own.
ARGS = parser.parse_args() if __name__ == "__main__" else parser.parse_args([])

setup_django(fake_bridge=False)

import htcondor2  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.backends.signals import connection_created  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from timing import CollectorTime  # noqa: E402

from condor_bridge.states import PROJECTION  # noqa: E402
from condor_bridge.submit import build_submit_description  # noqa: E402
from condor_bridge.types import FileMode, JobRequest  # noqa: E402
from jobs import sync  # noqa: E402
from jobs.bridge import get_bridge  # noqa: E402
from jobs.models import Job, JobState  # noqa: E402

JOBS = ARGS.jobs
CHANGED = JOBS // 10
LEFT_QUEUE = max(JOBS // 100, 1)
# sync_schedds, which imports this module's cycles, takes `--profile` too.
PROFILE = "--profile" in sys.argv


@contextmanager
def counting_condor_calls():
    """Counts the schedd and collector calls htcondor2 makes while inside (a locate's own
    collector query counts as the locate). Each thread nests on its own: the sync asks
    several schedds at once."""
    calls: Counter[str] = Counter()
    local = threading.local()
    lock = threading.Lock()
    patched: list[tuple[type, str, Callable]] = []
    for cls, names in (
        (htcondor2.Schedd, ("query", "history", "submit", "act")),
        (htcondor2.Collector, ("query", "locate")),
    ):
        for name in names:
            original = getattr(cls, name)

            def wrapper(self, *args, _original=original, _label=f"{cls.__name__}.{name}", **kw):
                depth = getattr(local, "depth", 0)
                if not depth:
                    with lock:
                        calls[_label] += 1
                local.depth = depth + 1
                try:
                    return _original(self, *args, **kw)
                finally:
                    local.depth = depth

            setattr(cls, name, wrapper)
            patched.append((cls, name, original))
    try:
        yield calls
    finally:
        for cls, name, original in patched:
            setattr(cls, name, original)


def raw_schedd() -> htcondor2.Schedd:
    get_bridge()  # sets the portal's token directory and collector for raw calls too
    collector = htcondor2.Collector(settings.CONDOR_COLLECTOR)
    return htcondor2.Schedd(collector.locate(htcondor2.DaemonType.Schedd))


def held_description(directory) -> dict[str, str]:
    """The portal's own submit description for a job asking for 8 GPUs (no workstation has
    them), held, each item's Nightshift id from itemdata's `jid`."""
    request = JobRequest(
        job_id=str(uuid.uuid4()),
        job_dir=str(directory),
        script_name="train.py",
        memory_mb=256,
        gpus=8,
    )
    description = build_submit_description(
        request, mode=FileMode.SHARED, instance=settings.NIGHTSHIFT_INSTANCE
    )
    description["My.NightshiftJobId"] = '"$(jid)"'
    description["hold"] = "true"
    return description


def instance_constraint() -> str:
    return f'NightshiftInstance == "{settings.NIGHTSHIFT_INSTANCE}"'


@contextmanager
def counting_sql():
    """Counts the SQL statements sent while inside (Django's query log keeps only 9,000), on
    this thread's connection and on those other threads open meanwhile: the sync applies
    its batches of changes in two."""
    statements = [0]
    lock = threading.Lock()

    def count(execute, sql, params, many, context):
        with lock:
            statements[0] += 1
        return execute(sql, params, many, context)

    def count_on(sender, connection, **kwargs):
        connection.execute_wrappers.append(count)

    connection_created.connect(count_on)
    try:
        with connection.execute_wrapper(count):
            yield statements
    finally:
        connection_created.disconnect(count_on)


# Each timed cycle's label and the seconds of its phases (SyncReport.phases), in order.
cycle_phases: list[tuple[str, dict[str, float]]] = []


def print_phases() -> None:
    """Where each timed cycle's time went, phase by phase (jobs.sync.SYNC_PHASES), and how
    much of it, across the phases, Python's cycle collector took."""
    columns = (*sync.SYNC_PHASES, "(collector)")
    width = max(len(label) for label, _ in cycle_phases)
    print(
        "\n  "
        + "where each cycle's time went (s)".ljust(width)
        + "".join(column.rjust(13) for column in columns)
    )
    for label, phases in cycle_phases:
        cells = (f"{phases[column]:.2f}" if column in phases else "-" for column in columns)
        print("  " + label.ljust(width) + "".join(cell.rjust(13) for cell in cells))


def timed_sync(label: str, figures: list[tuple[str, ...]]) -> sync.SyncReport:
    if PROFILE:
        # Only here: bench-gil imports this module, and make test's venv has no profiler.
        from pyinstrument import Profiler

    profiler = Profiler() if PROFILE else None
    collector = CollectorTime()
    with counting_condor_calls() as calls, counting_sql() as statements, collector:
        if profiler:
            profiler.start()
        started = time.perf_counter()
        report = sync.jobs_sync()
        seconds = time.perf_counter() - started
        if profiler:
            profiler.stop()
            print(profiler.output_text(color=False, show_all=False))
    condor = ", ".join(f"{name} {count}" for name, count in sorted(calls.items()))
    figures.append(
        (
            f"{label} ({report.changed:,} rows changed)",
            f"{seconds:.2f} s",
            str(statements[0]),
            condor,
        )
    )
    cycle_phases.append((label, report.phases | {"(collector)": collector.seconds}))
    return report


def main() -> None:
    setup_test_environment()
    settings.DEBUG = False
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    schedd = raw_schedd()
    figures: list[tuple[str, ...]] = []
    try:
        user = get_user_model().objects.create_user("bench", password="bench-password-123")
        directory = settings.JOBS_DIR / "bench-sync"
        directory.mkdir(parents=True, exist_ok=True)
        description = held_description(directory)
        ids = [str(uuid.uuid4()) for _ in range(JOBS)]
        started = time.perf_counter()
        result = schedd.submit(
            htcondor2.Submit(description), itemdata=iter([{"jid": jid} for jid in ids])
        )
        print(f"submitted {JOBS:,} held jobs in {time.perf_counter() - started:.1f} s")
        Job.objects.bulk_create(
            (
                Job(
                    public_id=jid,
                    owner=user,
                    name=f"sync {n}",
                    state=JobState.IDLE,
                    request={"script_name": "train.py", "memory_mb": 256, "gpus": 8},
                    output_dir=str(directory),
                    cluster_id=result.cluster(),
                    proc_id=n,
                )
                for n, jid in enumerate(ids)
            ),
            batch_size=2000,
        )

        timed_sync(f"sync, {JOBS:,} active, all changed", figures)
        timed_sync(f"sync, {JOBS:,} active, nothing changed", figures)

        # A tenth changed: most back to idle in the portal's view, and some removed from
        # the queue so that the cycle also reads their final ads from the history.
        Job.objects.filter(proc_id__lt=CHANGED).update(state=JobState.IDLE)
        schedd.act(
            htcondor2.JobAction.Remove,
            f"ClusterId == {result.cluster()} && ProcId >= {JOBS - LEFT_QUEUE}",
        )
        time.sleep(2)
        timed_sync(
            f"sync, {JOBS:,} active, {CHANGED + LEFT_QUEUE:,} changed "
            f"({LEFT_QUEUE} left the queue)",
            figures,
        )

        # Released, they wait: no workstation has 8 GPUs, and each job is told so.
        schedd.act(htcondor2.JobAction.Release, instance_constraint())
        time.sleep(2)
        timed_sync(f"sync, {JOBS - LEFT_QUEUE:,} released: idle, each told why it waits", figures)
        timed_sync(f"sync, {JOBS - LEFT_QUEUE:,} idle, nothing changed", figures)

        queries = []
        for _ in range(3):
            started = time.perf_counter()
            ads = schedd.query(constraint=instance_constraint(), projection=PROJECTION)
            queries.append(time.perf_counter() - started)
        figures.append(
            (
                f"raw htcondor2 Schedd.query of the same {len(ads):,} jobs (best of 3)",
                f"{min(queries):.2f} s",
                "0",
                "Schedd.query 1",
            )
        )
    finally:
        try:
            schedd.act(htcondor2.JobAction.Remove, instance_constraint())
        finally:
            connection.creation.destroy_test_db(old_name, verbosity=0)

    headers = ("figure", "wall", "SQL", "HTCondor calls")
    widths = [max(len(row[i]) for row in [headers, *figures]) for i in range(4)]
    print(f"\nNightshift sync at scale ({time.strftime('%Y-%m-%d %H:%M')})")
    for row in [headers, *figures]:
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    print_phases()


if __name__ == "__main__":
    main()
