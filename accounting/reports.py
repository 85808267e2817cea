"""Usage reports: every figure aggregated in PostgreSQL from usage records and capacity samples.

Each report table is a `Table` (named columns and rows) that the page, its charts, the CSV
exports and the API all present as they are, so that they can never disagree. SQL text here is
fixed: groupings come from a closed list, and every value is a query parameter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from labs.models import Lab, Membership

from .models import UsageRecord
from .periods import Period

GROUPINGS = {
    # name: (label, SQL for the usage record's group, SQL for a job's group)
    "user": ("User", "u.username", "u.username"),
    "lab": ("Lab", "COALESCE(l.name, '(no lab)')", "COALESCE(l.name, '(no lab)')"),
    "workstation": ("Workstation", "NULLIF(r.workstation, '')", "NULLIF(j.workstation, '')"),
    "gpu_model": ("GPU model", "NULLIF(r.gpu_model, '')", "NULLIF(j.gpu_model, '')"),
    # Runs that flocked to another pool, by its central manager, beside the home pool's.
    "pool": (
        "Pool",
        "COALESCE(NULLIF(r.pool, ''), '(home pool)')",
        "COALESCE(NULLIF(j.pool, ''), '(home pool)')",
    ),
}
OUTCOMES = (
    ("completed", "Completed"),
    ("failed", "Failed"),
    ("cancelled", "Cancelled"),
    ("runtime_limit", "Removed by limit"),
    ("removed", "Removed (other)"),
)
WAIT_BUCKETS = (
    # (label, upper bound in seconds)
    ("< 1 min", 60),
    ("1–5 min", 300),
    ("5–15 min", 900),
    ("15–60 min", 3600),
    ("1–4 h", 4 * 3600),
    ("4–24 h", 24 * 3600),
    ("> 1 day", None),
)
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# The over-time chart stacks this many groups; the rest are summed as "others".
STACKED_GROUPS = 8


class ReportNotAllowed(Exception):
    """The user leads no lab and is no admin, or asked for a lab they do not lead."""


@dataclass(frozen=True)
class Scope:
    """Whose usage a report covers: some labs, or (lab_ids None) everything."""

    lab_ids: tuple[int, ...] | None
    label: str

    def sql(self, column: str) -> str:
        return "TRUE" if self.lab_ids is None else f"{column} = ANY(%(labs)s)"

    def params(self) -> dict:
        return {} if self.lab_ids is None else {"labs": list(self.lab_ids)}


def report_labs(user) -> list[Lab]:
    """The labs whose reports a user may read: those they lead; all for admins."""
    if user.is_staff:
        return list(Lab.objects.order_by("name"))
    if not user.has_perm("labs.lead_lab"):
        return []
    return list(
        Lab.objects.filter(memberships__user=user, memberships__role=Membership.Role.LEAD)
        .distinct()
        .order_by("name")
    )


def report_scope(user, lab_id: int | None = None) -> Scope:
    """The scope a user asked for; ReportNotAllowed for a lab they may not read."""
    labs = report_labs(user)
    if lab_id is not None:
        lab = next((lab for lab in labs if lab.pk == lab_id), None)
        if lab is None:
            raise ReportNotAllowed("No such lab among those whose reports you can read.")
        return Scope((lab.pk,), lab.name)
    if user.is_staff:
        return Scope(None, "all labs and users")
    if not labs:
        raise ReportNotAllowed("Reports are for lab leads and administrators.")
    return Scope(tuple(lab.pk for lab in labs), ", ".join(lab.name for lab in labs))


@dataclass
class Table:
    name: str
    title: str
    columns: list[tuple[str, str]]  # (key, heading)
    rows: list[dict] = field(default_factory=list)
    note: str = ""

    @property
    def column_list(self) -> list[dict]:
        return [{"key": key, "heading": heading} for key, heading in self.columns]

    def cells(self) -> list[list]:
        """The rows as lists in column order, for templates."""
        return [[row.get(key) for key, _ in self.columns] for row in self.rows]

    def csv_rows(self) -> Iterator[list]:
        yield [heading for _, heading in self.columns]
        for row in self.rows:
            yield [row.get(key, "") for key, _ in self.columns]


def fetch_rows(sql: str, params: dict) -> list[dict]:
    # PostgreSQL's JIT compiler misjudges these aggregates as costly and spends more time
    # compiling them (200 ms and more) than running them; a report never gains from it.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        cursor.execute(sql, params)
        names = [column.name for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _round(value, digits: int = 2) -> float:
    return round(float(value or 0), digits)


def _percent(part, whole) -> float | None:
    return round(100 * float(part) / float(whole), 1) if whole else None


# Seconds of a record inside the period; a run still going counts until now.
_OVERLAP = """GREATEST(0, EXTRACT(EPOCH FROM
    LEAST(COALESCE(r.ended_at, %(now)s), %(end)s) - GREATEST(r.started_at, %(start)s)))"""
# The share of a finished run's committed and lost time that falls inside the period.
_SHARE = f"CASE WHEN r.wall_s > 0 THEN {_OVERLAP} / r.wall_s ELSE 0 END"
# What of a run is charged: all of it but the work an owner's reclaim lost (forgiven_s), as
# accounting.selectors.gpu_seconds_between, the quota's one definition, says.
_CHARGED = "(1 - LEAST(COALESCE(r.forgiven_s / NULLIF(r.wall_s, 0), 0), 1))"
_IN_PERIOD = """r.started_at < %(end)s AND (r.ended_at IS NULL OR r.ended_at > %(start)s)"""


def _params(scope: Scope, period: Period, **extra) -> dict:
    now = timezone.now()
    return {
        "start": period.start,
        "end": min(period.end, max(now, period.start)),
        "now": now,
        "tz": settings.TIME_ZONE,
        **scope.params(),
        **extra,
    }


def usage_by_group(scope: Scope, period: Period, group: str) -> Table:
    label, record_group, _ = GROUPINGS[group]
    rows = fetch_rows(
        f"""
        SELECT {record_group} AS grp,
               SUM({_OVERLAP} * r.gpus * {_CHARGED}) / 3600 AS gpu_hours,
               SUM({_OVERLAP}) / 3600 AS wall_hours,
               SUM(LEAST(r.forgiven_s, r.wall_s) * {_SHARE} * r.gpus) / 3600
                   AS forgiven_gpu_hours,
               SUM(r.committed_s * {_SHARE} * r.gpus) / 3600 AS committed_gpu_hours,
               SUM(r.badput_s * {_SHARE} * r.gpus) / 3600 AS badput_gpu_hours,
               COUNT(*) AS runs, COUNT(DISTINCT r.job_id) AS jobs,
               COUNT(*) FILTER (WHERE r.ended_by = 'evicted') AS evictions
        FROM accounting_usagerecord r
        JOIN auth_user u ON u.id = r.user_id
        LEFT JOIN labs_lab l ON l.id = r.lab_id
        WHERE {_IN_PERIOD} AND {scope.sql("r.lab_id")}
        GROUP BY 1 ORDER BY 2 DESC, 1
        """,  # noqa: S608 - fixed fragments; every value is a parameter
        _params(scope, period),
    )
    table = Table(
        "usage",
        f"GPU-hours by {label.lower()}",
        [
            ("group", label),
            ("gpu_hours", "GPU-hours"),
            ("wall_hours", "Wall hours"),
            ("committed_gpu_hours", "Committed GPU-hours"),
            ("badput_gpu_hours", "Lost GPU-hours"),
            ("forgiven_gpu_hours", "Of them not charged"),
            ("goodput_percent", "Goodput %"),
            ("runs", "Runs"),
            ("jobs", "Jobs"),
            ("evictions", "Evictions"),
        ],
        note="GPU-hours as quotas charge them: held, less the work lost when a "
        "workstation's owner asked for it back (lost, but not charged).",
    )
    for row in rows:
        finished = float(row["committed_gpu_hours"] or 0) + float(row["badput_gpu_hours"] or 0)
        table.rows.append(
            {
                "group": row["grp"] or "(unknown)",
                "gpu_hours": _round(row["gpu_hours"], 3),
                "wall_hours": _round(row["wall_hours"]),
                "committed_gpu_hours": _round(row["committed_gpu_hours"], 3),
                "badput_gpu_hours": _round(row["badput_gpu_hours"], 3),
                "forgiven_gpu_hours": _round(row["forgiven_gpu_hours"], 3),
                "goodput_percent": _percent(row["committed_gpu_hours"], finished),
                "runs": row["runs"],
                "jobs": row["jobs"],
                "evictions": row["evictions"],
            }
        )
    return table


def usage_over_time(scope: Scope, period: Period, group: str) -> Table:
    """GPU-hours per day (or week) and group; runs that span midnight are split at it."""
    label, record_group, _ = GROUPINGS[group]
    rows = fetch_rows(
        f"""
        WITH buckets AS MATERIALIZED (
            SELECT local_start::date AS bucket,
                   local_start AT TIME ZONE %(tz)s AS bucket_start,
                   (local_start + %(step)s::interval) AT TIME ZONE %(tz)s AS bucket_end
            FROM generate_series(date_trunc(%(unit)s, %(start)s AT TIME ZONE %(tz)s),
                                 %(end)s AT TIME ZONE %(tz)s, %(step)s::interval) AS local_start
        ), runs AS MATERIALIZED (
            SELECT {record_group} AS grp, r.gpus * {_CHARGED} AS gpus,
                   GREATEST(r.started_at, %(start)s) AS run_start,
                   LEAST(COALESCE(r.ended_at, %(now)s), %(end)s) AS run_end
            FROM accounting_usagerecord r
            JOIN auth_user u ON u.id = r.user_id
            LEFT JOIN labs_lab l ON l.id = r.lab_id
            WHERE {_IN_PERIOD} AND {scope.sql("r.lab_id")} AND r.gpus > 0
        )
        SELECT b.bucket, runs.grp,
               SUM(EXTRACT(EPOCH FROM LEAST(runs.run_end, b.bucket_end)
                                      - GREATEST(runs.run_start, b.bucket_start))
                   * runs.gpus) / 3600 AS gpu_hours
        FROM runs JOIN buckets b
          ON runs.run_start < b.bucket_end AND runs.run_end > b.bucket_start
        GROUP BY 1, 2 ORDER BY 1, 2
        """,  # noqa: S608 - fixed fragments; every value is a parameter
        _params(scope, period, unit=period.bucket, step=f"1 {period.bucket}"),
    )
    unit = "Week of" if period.bucket == "week" else "Day"
    table = Table(
        "over_time",
        f"GPU-hours per {period.bucket} by {label.lower()}",
        [("bucket", unit), ("group", label), ("gpu_hours", "GPU-hours")],
    )
    table.rows = [
        {
            "bucket": row["bucket"].isoformat(),
            "group": row["grp"] or "(unknown)",
            "gpu_hours": _round(row["gpu_hours"], 3),
        }
        for row in rows
        if row["gpu_hours"]
    ]
    return table


def outcomes_by_group(scope: Scope, period: Period, group: str) -> Table:
    """How the jobs that ended in the period ended."""
    label, _, job_group = GROUPINGS[group]
    counts = ", ".join(
        f"COUNT(*) FILTER (WHERE j.outcome = '{key}') AS {key}" for key, _ in OUTCOMES
    )
    rows = fetch_rows(
        f"""
        SELECT {job_group} AS grp, COUNT(*) AS total, {counts}
        FROM jobs_job j
        JOIN auth_user u ON u.id = j.owner_id
        LEFT JOIN labs_lab l ON l.id = j.lab_id
        WHERE j.finished_at >= %(start)s AND j.finished_at < %(end)s AND j.outcome <> ''
          AND {scope.sql("j.lab_id")}
        GROUP BY 1 ORDER BY 2 DESC, 1
        """,  # noqa: S608 - fixed fragments; every value is a parameter
        _params(scope, period),
    )
    table = Table(
        "outcomes",
        f"Job outcomes by {label.lower()}",
        [("group", label), *OUTCOMES, ("total", "Total"), ("success_percent", "Completed %")],
    )
    for row in rows:
        table.rows.append(
            {
                "group": row["grp"] or "(never ran)",
                "total": row["total"],
                **{key: row[key] for key, _ in OUTCOMES},
                "success_percent": _percent(row["completed"], row["total"]),
            }
        )
    return table


def queue_waits(scope: Scope, period: Period, group: str) -> Table:
    """How long jobs waited for their first workstation, for jobs that started in the period."""
    label, record_group, _ = GROUPINGS[group]
    buckets = []
    lower = 0
    for index, (_, upper) in enumerate(WAIT_BUCKETS):
        condition = f"r.wait_s >= {lower}" + (f" AND r.wait_s < {upper}" if upper else "")
        buckets.append(f"COUNT(*) FILTER (WHERE {condition}) AS b{index}")
        lower = upper or lower
    rows = fetch_rows(
        f"""
        SELECT {record_group} AS grp, GROUPING({record_group}) AS is_total, COUNT(*) AS starts,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY r.wait_s) AS median_s,
               percentile_cont(0.9) WITHIN GROUP (ORDER BY r.wait_s) AS p90_s,
               {", ".join(buckets)}
        FROM accounting_usagerecord r
        JOIN auth_user u ON u.id = r.user_id
        LEFT JOIN labs_lab l ON l.id = r.lab_id
        WHERE r.first_run AND r.wait_s IS NOT NULL
          AND r.started_at >= %(start)s AND r.started_at < %(end)s AND {scope.sql("r.lab_id")}
        GROUP BY ROLLUP ({record_group}) ORDER BY is_total DESC, starts DESC, grp
        """,  # noqa: S608 - fixed fragments; every value is a parameter
        _params(scope, period),
    )
    table = Table(
        "waits",
        f"Queue wait before the first start, by {label.lower()}",
        [
            ("group", label),
            ("starts", "Jobs started"),
            ("median_minutes", "Median (min)"),
            ("p90_minutes", "90th percentile (min)"),
            *((f"b{i}", text) for i, (text, _) in enumerate(WAIT_BUCKETS)),
        ],
    )
    for row in rows:
        table.rows.append(
            {
                # ROLLUP's grand total comes first.
                "group": "All" if row["is_total"] else (row["grp"] or "(unknown)"),
                "starts": row["starts"],
                "median_minutes": _round((row["median_s"] or 0) / 60, 1),
                "p90_minutes": _round((row["p90_s"] or 0) / 60, 1),
                **{f"b{i}": row[f"b{i}"] for i in range(len(WAIT_BUCKETS))},
            }
        )
    return table


def losses_by_lab(scope: Scope, period: Period, by_lab: Table | None = None) -> Table:
    """The usage table grouped by lab (`by_lab`, when the report already has it), shown as
    losses and goodput."""
    table = (
        dataclasses.replace(by_lab) if by_lab is not None else usage_by_group(scope, period, "lab")
    )
    table.name, table.title = "losses", "Eviction losses and goodput by lab"
    table.columns = [
        ("group", "Lab"),
        ("gpu_hours", "GPU-hours"),
        ("committed_gpu_hours", "Committed"),
        ("badput_gpu_hours", "Lost to evictions"),
        ("goodput_percent", "Goodput %"),
        ("evictions", "Evictions"),
    ]
    table.note = "Goodput = committed ÷ (committed + lost) GPU-hours of runs that ended."
    return table


def _utilization_rows(period: Period) -> list[dict]:
    """Capacity samples summed per (hour of day, day of week): 168 rows, one scan."""
    return fetch_rows(
        """
        SELECT EXTRACT(HOUR FROM s.taken_at AT TIME ZONE %(tz)s)::int AS hour,
               EXTRACT(ISODOW FROM s.taken_at AT TIME ZONE %(tz)s)::int AS weekday,
               SUM(s.total_gpus * s.seconds) / 3600.0 AS total,
               SUM(s.idle_gpus * s.seconds) / 3600.0 AS idle,
               SUM(s.nightshift_gpus * s.seconds) / 3600.0 AS nightshift,
               SUM(s.other_gpus * s.seconds) / 3600.0 AS other,
               SUM(s.unavailable_gpus * s.seconds) / 3600.0 AS unavailable
        FROM accounting_capacitysample s
        WHERE s.taken_at >= %(start)s AND s.taken_at < %(end)s
        GROUP BY 1, 2
        """,
        _params(Scope(None, ""), period),
    )


def _utilization_table(rows: list[dict], by: str) -> Table:
    found: dict[int, dict] = {}
    for row in rows:  # at most 168 (hour, weekday) sums, folded into 24 or 7
        into = found.setdefault(row[by], {})
        for name in ("total", "idle", "nightshift", "other", "unavailable"):
            into[name] = into.get(name, 0) + float(row[name] or 0)
    slots = range(24) if by == "hour" else range(1, 8)
    title = "hour of day" if by == "hour" else "day of week"
    table = Table(
        f"utilization_{by}",
        f"Pool GPUs by {title}",
        [
            (by, "Hour" if by == "hour" else "Day"),
            ("total", "GPU-hours in pool"),
            ("idle", "Idle"),
            ("nightshift", "Nightshift"),
            ("other", "Other jobs"),
            ("unavailable", "Owner or offline"),
            ("utilization_percent", "Utilization %"),
            ("harvest_percent", "Harvest %"),
        ],
        note="Utilization = used ÷ all GPU-hours. Harvest = used ÷ GPU-hours that were "
        "available to jobs (idle or used), so the share of idle time that did work.",
    )
    for slot in slots:
        row = found.get(slot, {})
        used = float(row.get("nightshift") or 0) + float(row.get("other") or 0)
        available = used + float(row.get("idle") or 0)
        table.rows.append(
            {
                by: f"{slot:02d}:00" if by == "hour" else WEEKDAYS[slot - 1],
                **{
                    name: _round(row.get(name), 2)
                    for name in ("total", "idle", "nightshift", "other", "unavailable")
                },
                "utilization_percent": _percent(used, row.get("total") or 0),
                "harvest_percent": _percent(used, available),
            }
        )
    return table


def utilization_by_hour(period: Period) -> Table:
    return _utilization_table(_utilization_rows(period), "hour")


def utilization_by_weekday(period: Period) -> Table:
    return _utilization_table(_utilization_rows(period), "weekday")


@dataclass
class Report:
    scope: Scope
    period: Period
    group: str
    tables: dict[str, Table]

    @property
    def totals(self) -> dict:
        usage = self.tables["usage"].rows
        waits = self.tables["waits"].rows
        outcomes = self.tables["outcomes"].rows
        committed = sum(r["committed_gpu_hours"] for r in usage)
        lost = sum(r["badput_gpu_hours"] for r in usage)
        return {
            "gpu_hours": round(sum(r["gpu_hours"] for r in usage), 2),
            "jobs_ended": sum(r["total"] for r in outcomes),
            "completed": sum(r["completed"] for r in outcomes),
            "goodput_percent": _percent(committed, committed + lost),
            "lost_gpu_hours": round(lost, 2),
            "median_wait_minutes": waits[0]["median_minutes"] if waits else None,
            "p90_wait_minutes": waits[0]["p90_minutes"] if waits else None,
        }


TABLES = (
    "usage",
    "over_time",
    "outcomes",
    "waits",
    "losses",
    "utilization_hour",
    "utilization_weekday",
)


def usage_report(scope: Scope, period: Period, group: str = "user") -> Report:
    if group not in GROUPINGS:
        raise ValueError(f"unknown grouping {group!r}")
    usage = usage_by_group(scope, period, group)
    tables = {
        "usage": usage,
        "over_time": usage_over_time(scope, period, group),
        "outcomes": outcomes_by_group(scope, period, group),
        "waits": queue_waits(scope, period, group),
        "losses": losses_by_lab(scope, period, usage if group == "lab" else None),
    }
    samples = _utilization_rows(period)
    tables["utilization_hour"] = _utilization_table(samples, "hour")
    tables["utilization_weekday"] = _utilization_table(samples, "weekday")
    return Report(scope, period, group, tables)


RECORD_COLUMNS = (
    ("job", "Job"),
    ("user", "User"),
    ("lab", "Lab"),
    ("started_at", "Started"),
    ("ended_at", "Ended"),
    ("workstation", "Workstation"),
    ("pool", "Pool"),
    ("gpu_model", "GPU model"),
    ("gpus", "GPUs"),
    ("wall_s", "Wall s"),
    ("committed_s", "Committed s"),
    ("badput_s", "Lost s"),
    ("gpu_hours", "GPU-hours"),
    ("wait_s", "Waited s"),
    ("ended_by", "Ended by"),
)


def usage_records_rows(scope: Scope, period: Period) -> Iterator[list]:
    """Every run in the period, one CSV row each, read with a server-side cursor."""
    records = UsageRecord.objects.filter(started_at__lt=period.end).exclude(
        ended_at__lte=period.start
    )
    if scope.lab_ids is not None:
        records = records.filter(lab_id__in=scope.lab_ids)
    yield [heading for _, heading in RECORD_COLUMNS]
    values = records.order_by("started_at", "id").values_list(
        "job__public_id",
        "user__username",
        "lab__name",
        "started_at",
        "ended_at",
        "workstation",
        "pool",
        "gpu_model",
        "gpus",
        "wall_s",
        "committed_s",
        "badput_s",
        "wait_s",
        "ended_by",
    )
    now = timezone.now()
    for row in values.iterator(chunk_size=5000):
        job, user, lab, start, end, ws, pool, model, gpus, wall, committed, bad, wait, by = row
        hours = (wall if end else max((now - start).total_seconds(), 0)) * gpus / 3600
        yield [
            job,
            user,
            lab or "",
            start.isoformat(),
            end.isoformat() if end else "",
            ws,
            pool,
            model,
            gpus,
            round(wall, 1),
            round(committed, 1),
            round(bad, 1),
            round(hours, 4),
            "" if wait is None else round(wait, 1),
            by or "running",
        ]


# Each table on its own, for exports: (scope, period, group) -> Table.
REPORT_TABLES = {
    "usage": usage_by_group,
    "over_time": usage_over_time,
    "outcomes": outcomes_by_group,
    "waits": queue_waits,
    "losses": lambda scope, period, group: losses_by_lab(scope, period),
    "utilization_hour": lambda scope, period, group: utilization_by_hour(period),
    "utilization_weekday": lambda scope, period, group: utilization_by_weekday(period),
}
