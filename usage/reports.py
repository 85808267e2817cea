"""Utilisation reports for lab leads and admins: how busy the GPU-hours that jobs held were.

From the usage summaries of the jobs that ended in the period (a job counts whole in the
period it ended in), aggregated in PostgreSQL. The scope, period, groupings and the Table
the page, its charts and the CSV exports present are the usage reports' own
(accounting.reports); SQL text is fixed and every value a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

from accounting.selectors import GROUPINGS, Period, Scope, Table, fetch_rows

# (label, lower bound, upper bound) of a job's average GPU utilisation, in percent.
BANDS = (("0–10 %", 0, 10), ("10–30 %", 10, 30), ("30–60 %", 30, 60), ("60–100 %", 60, 101))
NOT_MEASURED = "not measured"
UNDER_USERS = 10
# Summaries' group, as the usage reports group runs (the job's workstation and GPU model).
_GROUP_SQL = {
    "user": "u.username",
    "lab": "COALESCE(l.name, '(no lab)')",
    "workstation": "NULLIF(j.workstation, '')",
    "gpu_model": "NULLIF(j.gpu_model, '')",
}
_FROM = """FROM usage_jobusagesummary s
        JOIN jobs_job j ON j.id = s.job_id
        JOIN auth_user u ON u.id = s.user_id
        LEFT JOIN labs_lab l ON l.id = s.lab_id
        WHERE s.ended_at >= %(start)s AND s.ended_at < %(end)s AND s.gpus_requested > 0
          AND {scope}"""


def _params(scope: Scope, period: Period) -> dict:
    return {"start": period.start, "end": period.end, **scope.params()}


def _round(value, digits: int = 2) -> float:
    return round(float(value or 0), digits)


def gpu_hours_by_band(scope: Scope, period: Period) -> Table:
    rows = fetch_rows(
        f"""SELECT CASE WHEN s.gpu_utilization IS NULL THEN -1
                        ELSE LEAST(FLOOR(s.gpu_utilization * 100), 100) END AS percent,
                   s.gpu_hours, s.idle_gpu_hours
            {_FROM.format(scope=scope.sql("s.lab_id"))}""",  # noqa: S608 - fixed fragments
        _params(scope, period),
    )
    bands = {label: {"jobs": 0, "gpu_hours": 0.0, "idle": 0.0} for label, _, _ in BANDS}
    bands[NOT_MEASURED] = {"jobs": 0, "gpu_hours": 0.0, "idle": 0.0}
    for row in rows:
        percent = float(row["percent"])
        label = (
            NOT_MEASURED
            if percent < 0
            else next(name for name, low, high in BANDS if low <= percent < high)
        )
        bands[label]["jobs"] += 1
        bands[label]["gpu_hours"] += float(row["gpu_hours"])
        bands[label]["idle"] += float(row["idle_gpu_hours"])
    total = sum(band["gpu_hours"] for band in bands.values())
    table = Table(
        "bands",
        "GPU-hours by how busy the job kept its GPUs",
        [
            ("band", "Average GPU utilisation"),
            ("jobs", "Jobs"),
            ("gpu_hours", "GPU-hours"),
            ("idle_gpu_hours", "Of them idle"),
            ("share_percent", "Share of GPU-hours %"),
        ],
        note="Each GPU job that ended in the period, by its GPUs' average utilisation over "
        "its whole run; 'not measured' where its workstation reported no GPU figures.",
    )
    for label, band in bands.items():
        table.rows.append(
            {
                "band": label,
                "jobs": band["jobs"],
                "gpu_hours": _round(band["gpu_hours"], 3),
                "idle_gpu_hours": _round(band["idle"], 3),
                "share_percent": round(100 * band["gpu_hours"] / total, 1) if total else None,
            }
        )
    return table


def idle_gpu_hours_by_group(scope: Scope, period: Period, group: str) -> Table:
    label = GROUPINGS[group][0]
    rows = fetch_rows(
        f"""SELECT {_GROUP_SQL[group]} AS grp, COUNT(*) AS jobs,
                   COUNT(*) FILTER (WHERE s.gpu_utilization IS NOT NULL) AS measured,
                   SUM(s.gpu_hours) AS gpu_hours,
                   SUM(s.gpu_hours) FILTER (WHERE s.gpu_utilization IS NOT NULL) AS measured_hours,
                   SUM(s.idle_gpu_hours) AS idle_gpu_hours
            {_FROM.format(scope=scope.sql("s.lab_id"))}
            GROUP BY 1 ORDER BY 6 DESC NULLS LAST, 1""",  # noqa: S608 - fixed fragments
        _params(scope, period),
    )
    table = Table(
        "idle",
        f"Allocated but idle GPU-hours by {label.lower()}",
        [
            ("group", label),
            ("jobs", "GPU jobs"),
            ("measured_jobs", "Measured"),
            ("gpu_hours", "GPU-hours"),
            ("idle_gpu_hours", "Idle GPU-hours"),
            ("idle_percent", "Idle % of measured"),
            ("utilisation_percent", "Utilisation %"),
        ],
        note="Idle GPU-hours: GPU-hours held x (1 - the GPUs' average utilisation), over the "
        "jobs whose GPUs were measured.",
    )
    for row in rows:
        measured = float(row["measured_hours"] or 0)
        idle = float(row["idle_gpu_hours"] or 0)
        table.rows.append(
            {
                "group": row["grp"] or "(unknown)",
                "jobs": row["jobs"],
                "measured_jobs": row["measured"],
                "gpu_hours": _round(row["gpu_hours"], 3),
                "idle_gpu_hours": _round(idle, 3),
                "idle_percent": round(100 * idle / measured, 1) if measured else None,
                "utilisation_percent": round(100 * (1 - idle / measured), 1) if measured else None,
            }
        )
    return table


def largest_under_users(scope: Scope, period: Period) -> Table:
    rows = fetch_rows(
        f"""SELECT u.username AS who, COALESCE(MAX(l.name), '') AS lab, COUNT(*) AS jobs,
                   SUM(s.idle_gpu_hours) AS idle_gpu_hours, SUM(s.gpu_hours) AS gpu_hours,
                   SUM(s.gpus_requested) AS gpus_requested,
                   SUM(COALESCE(s.gpus_active, CEIL(s.gpu_utilization * s.gpus_requested - 0.05)))
                       AS gpus_used,
                   PERCENTILE_CONT(0.5) WITHIN GROUP (
                       ORDER BY s.memory_peak_mb / NULLIF(s.memory_requested_mb, 0)) AS memory_share
            {_FROM.format(scope=scope.sql("s.lab_id"))} AND s.gpu_utilization IS NOT NULL
            GROUP BY 1 HAVING SUM(s.idle_gpu_hours) > 0
            ORDER BY 4 DESC, 1 LIMIT %(limit)s""",  # noqa: S608 - fixed fragments
        _params(scope, period) | {"limit": UNDER_USERS},
    )
    table = Table(
        "under_users",
        "The largest under-users of GPUs",
        [
            ("user", "User"),
            ("lab", "Lab"),
            ("jobs", "Measured GPU jobs"),
            ("idle_gpu_hours", "Idle GPU-hours"),
            ("utilisation_percent", "Utilisation %"),
            ("gpus_requested", "GPUs asked for"),
            ("gpus_used", "GPUs used"),
            ("memory_used_percent", "Median memory used %"),
        ],
        note="Ranked by idle GPU-hours; GPUs asked for and used are summed over their jobs.",
    )
    for row in rows:
        hours = float(row["gpu_hours"] or 0)
        idle = float(row["idle_gpu_hours"] or 0)
        share = row["memory_share"]
        table.rows.append(
            {
                "user": row["who"],
                "lab": row["lab"],
                "jobs": row["jobs"],
                "idle_gpu_hours": _round(idle, 3),
                "utilisation_percent": round(100 * (1 - idle / hours), 1) if hours else None,
                "gpus_requested": int(row["gpus_requested"] or 0),
                "gpus_used": int(row["gpus_used"] or 0),
                "memory_used_percent": None if share is None else round(100 * float(share), 1),
            }
        )
    return table


def energy_by_group(scope: Scope, period: Period, group: str) -> Table:
    label = GROUPINGS[group][0]
    rows = fetch_rows(
        f"""SELECT {_GROUP_SQL[group]} AS grp, COUNT(*) AS jobs,
                   COUNT(*) FILTER (WHERE s.gpu_energy_kwh IS NOT NULL) AS measured,
                   SUM(s.gpu_hours) FILTER (WHERE s.gpu_energy_kwh IS NOT NULL) AS gpu_hours,
                   SUM(s.gpu_energy_kwh) AS kwh,
                   SUM(s.co2e_kg) AS co2e_kg,
                   COUNT(*) FILTER (WHERE s.gpu_energy_kwh IS NOT NULL
                                     AND s.co2e_kg IS NULL) AS without_co2e,
                   BOOL_OR(s.energy_simulated) AS simulated
            {_FROM.format(scope=scope.sql("s.lab_id"))}
            GROUP BY 1 ORDER BY 5 DESC NULLS LAST, 1""",  # noqa: S608 - fixed fragments
        _params(scope, period),
    )
    table = Table(
        "energy",
        f"GPU energy by {label.lower()}",
        [
            ("group", label),
            ("jobs", "GPU jobs"),
            ("measured_jobs", "Measured"),
            ("kwh", "kWh above idle"),
            ("co2e_kg", "kg CO2e"),
            ("watts_per_gpu", "Mean W per GPU"),
            ("simulated", "Simulated GPUs"),
        ],
        note="The GPUs' energy above their idle draw, from the job helper's power samples; "
        "CO2e at the site's grid intensity for the hour each was drawn (blank where the site "
        "set none). 'Simulated': the personal pool's simulated GPUs, whose figures are the "
        "simulator's.",
    )
    for row in rows:
        hours = float(row["gpu_hours"] or 0)
        kwh = row["kwh"]
        table.rows.append(
            {
                "group": row["grp"] or "(unknown)",
                "jobs": row["jobs"],
                "measured_jobs": row["measured"],
                "kwh": None if kwh is None else _round(kwh, 4),
                "co2e_kg": None
                if row["co2e_kg"] is None or row["without_co2e"]
                else _round(row["co2e_kg"], 4),
                "watts_per_gpu": round(1000 * float(kwh) / hours, 1) if kwh and hours else None,
                "simulated": "yes" if row["simulated"] else "",
            }
        )
    return table


@dataclass
class UtilisationReport:
    scope: Scope
    period: Period
    tables: dict[str, Table]

    @property
    def totals(self) -> dict:
        bands = self.tables["bands"].rows
        measured = [row for row in bands if row["band"] != NOT_MEASURED]
        hours = sum(row["gpu_hours"] for row in measured)
        idle = sum(row["idle_gpu_hours"] for row in measured)
        return {
            "gpu_hours": round(sum(row["gpu_hours"] for row in bands), 2),
            "measured_gpu_hours": round(hours, 2),
            "idle_gpu_hours": round(idle, 2),
            "utilisation_percent": round(100 * (1 - idle / hours), 1) if hours else None,
            "jobs": sum(row["jobs"] for row in bands),
            "kwh": round(sum(row["kwh"] or 0 for row in self.tables["energy"].rows), 3),
            "co2e_kg": None
            if any(row["kwh"] and row["co2e_kg"] is None for row in self.tables["energy"].rows)
            else round(sum(row["co2e_kg"] or 0 for row in self.tables["energy"].rows), 3),
            "energy_simulated": any(row["simulated"] for row in self.tables["energy"].rows),
        }


TABLES = {
    "bands": lambda scope, period, group: gpu_hours_by_band(scope, period),
    "idle": idle_gpu_hours_by_group,
    "under_users": lambda scope, period, group: largest_under_users(scope, period),
    "energy": energy_by_group,
}


def utilisation_report(scope: Scope, period: Period, group: str = "user") -> UtilisationReport:
    if group not in GROUPINGS:
        raise ValueError(f"unknown grouping {group!r}")
    tables = {name: table(scope, period, group) for name, table in TABLES.items()}
    return UtilisationReport(scope, period, tables)
