"""How fast a lab lead's usage report is with 1,000,000 usage records in the database.

Seeds a throw-away PostgreSQL database with a year of campus usage: 1,000,000 run segments
(of 400,000 jobs, 600 users in 20 labs of very different sizes, 60 workstations) and 45 days of
5-minute capacity samples of every workstation. Then times, median of 5 after a warm-up:

- the floor: one SQL statement that sums the lab's GPU-hours for the 30 days (the least any
  report must do);
- the whole 30-day report of the largest lab (every table the page shows: seven queries),
  grouped by user and by workstation;
- the whole 30-day report of everything, as an admin sees it;
- each table of the lab's report on its own;
- the CSV export of every run of the lab in those 30 days, streamed to the end;
- a quota check's GPU-hours for one user (the same records, the same definition).

Run with `make bench-reports` (PostgreSQL must be up; HTCondor and Redis are not needed).
"""

from __future__ import annotations

import io
import json
import os
import random
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

from portal_setup import setup_django

REPO = setup_django(fake_bridge=True)

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection, models  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from timing import median_ms  # noqa: E402

from accounting import periods, reports  # noqa: E402
from accounting.models import CapacitySample, UsageRecord  # noqa: E402
from accounting.selectors import gpu_hours_used  # noqa: E402
from jobs.models import Job  # noqa: E402
from labs.models import Lab  # noqa: E402

# --quick: a few thousand rows, for make test (tests/bench), which checks it still runs.
QUICK = "--quick" in sys.argv[1:]
RECORDS = 5_000 if QUICK else 1_000_000
JOBS = 2_000 if QUICK else 400_000
USERS = 60 if QUICK else 600
LABS = 5 if QUICK else 20
WORKSTATIONS = 10 if QUICK else 60
SAMPLE_DAYS = 45
SAMPLE_S = 3600 if QUICK else 300
REPEATS = 1 if QUICK else 5
MODELS = [
    "Tesla V100-PCIE-16GB",
    "A100-SXM4-40GB",
    "TITAN RTX",
    "GeForce RTX 3090",
    "GeForce RTX 4090",
    "GeForce GTX 1080 Ti",
]
OUTCOMES = ["completed"] * 7 + ["failed", "cancelled", "runtime_limit"]
NOW = datetime.now(tz=UTC)
random.seed(20261129)


def _text(value) -> str:
    if value is None:
        return r"\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict | list):
        value = json.dumps(value)
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def copy_rows(model: type[models.Model], rows, batch: int = 100_000) -> None:
    """COPY rows (dicts of field attnames) into the model's table; defaults for the rest
    (a column with a database default is left to the database)."""
    fields = [
        f
        for f in model._meta.concrete_fields
        if not f.primary_key and f.db_default is models.NOT_PROVIDED
    ]
    columns = ", ".join(f'"{f.column}"' for f in fields)
    defaults = {f.attname: f.get_default() for f in fields}
    for name in ("created_at", "recorded_at"):
        if name in defaults:
            defaults[name] = NOW
    buffer = io.StringIO()

    def flush():
        buffer.seek(0)
        with connection.cursor() as cursor:
            cursor.cursor.copy_expert(f"COPY {model._meta.db_table} ({columns}) FROM STDIN", buffer)
        buffer.seek(0)
        buffer.truncate()

    for count, row in enumerate(rows, start=1):
        values = defaults | row
        buffer.write("\t".join(_text(values[f.attname]) for f in fields) + "\n")
        if count % batch == 0:
            flush()
    flush()


def seed() -> tuple[Lab, int]:
    user_model = get_user_model()
    labs = Lab.objects.bulk_create(
        [Lab(name=f"Lab {i:02d}", accounting_group=f"group_lab{i:02d}") for i in range(LABS)]
    )
    # Lab sizes differ a lot: lab 0 has about a fifth of all users.
    weights = [1 / (i + 1) for i in range(LABS)]
    users = user_model.objects.bulk_create(
        [user_model(username=f"student{i:03d}", password="!") for i in range(USERS)]
    )
    user_lab = {u.pk: random.choices(labs, weights)[0].pk for u in users}
    user_ids = [u.pk for u in users]
    activity = [random.paretovariate(1.2) for _ in users]  # a few heavy users
    workstations = [
        (f"ws-{i:02d}", MODELS[i % len(MODELS)], 1 + i % 4) for i in range(WORKSTATIONS)
    ]

    started = time.perf_counter()
    job_owner = random.choices(user_ids, activity, k=JOBS)
    job_created = [NOW - timedelta(seconds=random.uniform(0, 365 * 86400)) for _ in range(JOBS)]
    copy_rows(
        Job,
        (
            {
                "public_id": uuid.uuid4(),
                "owner_id": owner,
                "lab_id": user_lab[owner],
                "name": f"train {i}",
                "gpus": 1 + (i % 5 == 0),
                "state": "completed",
                "outcome": OUTCOMES[i % 10],
                "output_dir": f"/nonexistent/{i}",
                "created_at": job_created[i],
                "finished_at": job_created[i] + timedelta(hours=6),
                "workstation": workstations[i % WORKSTATIONS][0],
                "request": {},
                "source": {},
            }
            for i, owner in enumerate(job_owner)
        ),
    )
    job_ids = list(Job.objects.order_by("pk").values_list("pk", flat=True))
    print(f"seeded {JOBS:,} jobs in {time.perf_counter() - started:.1f} s")

    started = time.perf_counter()

    def records():
        for n in range(RECORDS):
            index = n % JOBS
            owner = job_owner[index]
            ws, model, _ = workstations[(index + n // JOBS) % WORKSTATIONS]
            start = job_created[index] + timedelta(
                seconds=random.expovariate(1 / 1800) + (n // JOBS) * 8 * 3600
            )
            if start > NOW:
                start = NOW - timedelta(seconds=random.uniform(0, 86400))
            wall = random.uniform(600, 12 * 3600)
            evicted = random.random() < 0.12
            committed = wall * random.random() * 0.5 if evicted else wall
            end = start + timedelta(seconds=wall)
            running = end > NOW
            yield {
                "job_id": job_ids[index],
                "user_id": owner,
                "lab_id": user_lab[owner],
                "started_at": start,
                "ended_at": None if running else end,
                "workstation": ws,
                "gpu_model": model,
                "gpus": 1 + (index % 5 == 0),
                "wall_s": 0.0 if running else wall,
                "committed_s": 0.0 if running else committed,
                "badput_s": wall - committed if evicted and not running else 0.0,
                "wait_s": random.expovariate(1 / 900),
                "first_run": n < JOBS,
                "ended_by": "" if running else ("evicted" if evicted else "completed"),
            }

    copy_rows(UsageRecord, records())
    print(f"seeded {RECORDS:,} usage records in {time.perf_counter() - started:.1f} s")

    started = time.perf_counter()
    first = NOW - timedelta(days=SAMPLE_DAYS)
    first = first.replace(second=0, microsecond=0, minute=first.minute - first.minute % 5)

    def samples():
        for step in range(SAMPLE_DAYS * 86400 // SAMPLE_S):
            at = first + timedelta(seconds=step * SAMPLE_S)
            night = at.hour < 8 or at.hour >= 19 or at.weekday() >= 5
            for ws, _, gpus in workstations:
                unavailable = 0 if night or random.random() < 0.3 else gpus
                used = random.randint(0, gpus - unavailable)
                ours = random.randint(0, used)
                yield {
                    "taken_at": at,
                    "seconds": SAMPLE_S,
                    "workstation": ws,
                    "total_gpus": gpus,
                    "idle_gpus": gpus - unavailable - used,
                    "nightshift_gpus": ours,
                    "other_gpus": used - ours,
                    "unavailable_gpus": unavailable,
                }

    copy_rows(CapacitySample, samples())
    count = CapacitySample.objects.count()
    print(f"seeded {count:,} capacity samples in {time.perf_counter() - started:.1f} s")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    biggest = labs[0]
    return biggest, max(user_ids, key=lambda pk: activity[user_ids.index(pk)])


def main() -> None:
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        lab, heavy_user = seed()
        period = periods.period_last_days(30)
        scope = reports.Scope((lab.pk,), lab.name)
        everything = reports.Scope(None, "everything")
        in_window = (
            UsageRecord.objects.filter(lab=lab, started_at__lt=period.end)
            .exclude(ended_at__lte=period.start)
            .count()
        )
        print(
            f"{lab.name}: {in_window:,} runs in the last 30 days "
            f"(of {UsageRecord.objects.filter(lab=lab).count():,})"
        )

        def floor():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT SUM(gpus * wall_s) FROM accounting_usagerecord "
                    "WHERE lab_id = %s AND started_at < %s "
                    "AND (ended_at IS NULL OR ended_at > %s)",
                    [lab.pk, period.end, period.start],
                )
                cursor.fetchall()

        def export():
            for _ in reports.usage_records_rows(scope, period):
                pass

        rows = [
            ("raw SQL: the lab's 30-day GPU-hours, one SUM (floor)", median_ms(floor, REPEATS)),
            (
                "30-day lab report, all 7 tables, by user",
                median_ms(lambda: reports.usage_report(scope, period, "user"), REPEATS),
            ),
            (
                "30-day lab report, all 7 tables, by workstation",
                median_ms(lambda: reports.usage_report(scope, period, "workstation"), REPEATS),
            ),
            (
                "30-day report of everything (admin), by lab",
                median_ms(lambda: reports.usage_report(everything, period, "lab"), REPEATS),
            ),
        ]
        for name, table in reports.REPORT_TABLES.items():
            rows.append(
                (
                    f"  lab table {name}",
                    median_ms(lambda t=table: t(scope, period, "user"), REPEATS),
                )
            )
        rows.append(
            (f"CSV export of the lab's {in_window:,} runs, streamed", median_ms(export, REPEATS))
        )
        runs = UsageRecord.objects.filter(user_id=heavy_user)
        rows.append(
            (
                "quota check: one heavy user's 7-day GPU-hours",
                median_ms(
                    lambda: gpu_hours_used(runs, since=NOW - timedelta(days=7), until=NOW), REPEATS
                ),
            )
        )
        print()
        width = max(len(name) for name, _ in rows)
        for name, ms in rows:
            print(f"{name:<{width}}  {ms:9.1f} ms")
    finally:
        connection.close()
        if os.environ.get("BENCH_KEEP_DB"):
            print(f"kept the database {connection.settings_dict['NAME']}")
        else:
            connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
