"""nightshift usage ID: what a job used (CPU, memory, disk, GPUs) and the advice it earns."""

from __future__ import annotations

import click
from rich.table import Table
from rich.text import Text

from .common import Context, counted, job_resolve, out, pass_context, print_json

COLUMNS = (
    ("cpus", "CPU cores", 1),
    ("memory_mb", "memory MB", 1),
    ("memory_peak_mb", "peak MB", 1),
    ("disk_mb", "disk MB", 1),
    ("gpu_utilization", "GPU %", 100),
    ("gpu_memory_mb", "GPU MB", 1),
)


def _figure(value: float | None, scale: float = 1) -> str:
    return "-" if value is None else f"{value * scale:.{0 if scale == 100 else 2}f}"


@click.command()
@click.argument("job_id")
@click.option("--samples", "show_samples", is_flag=True, help="Every sample, run by run.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def usage(obj: Context, job_id: str, show_samples: bool, as_json: bool) -> None:
    """What a job used, beside what it asked for, and how to ask better next time."""
    job = job_resolve(obj.client, job_id)
    body = obj.client.get(f"/jobs/{job['id']}/usage/")
    if as_json:
        print_json(body)
        return
    asked = body["requested"]
    # Bold where the terminal shows it, and plain text in a pipe; the job's name is never
    # read as markup.
    out.print(
        Text.assemble(
            (job["name"], "bold"),
            f" asked for {counted(asked['gpus'], 'GPU')}, "
            f"{counted(asked['cpus'], 'CPU')}, {asked['memory_mb']} MB memory",
        )
    )
    summary = body["summary"]
    if summary:
        rows = [
            ("Measured", f"{summary['measured_s'] / 60:.1f} min, {summary['samples']} samples"),
            ("CPU", f"{_figure(summary['cpus_used'])} cores busy on average"),
            ("Memory peak", f"{_figure(summary['memory_peak_mb'])} MB"),
            ("Disk peak", f"{_figure(summary['disk_peak_mb'])} MB"),
        ]
        if asked["gpus"]:
            rows += [
                (
                    "GPUs used",
                    "-"
                    if summary["gpus_used"] is None
                    else f"{summary['gpus_used']} of {asked['gpus']}",
                ),
                ("GPU busy", f"{_figure(summary['gpu_utilization'], 100)} %"),
                ("GPU idle", f"{_figure(summary['gpu_idle_share'], 100)} % of the time"),
                ("GPU memory peak", f"{_figure(summary['gpu_memory_peak_mb'])} MB"),
                ("GPU-hours", f"{summary['gpu_hours']:.2f}, {summary['idle_gpu_hours']:.2f} idle"),
                ("GPU energy", _energy(summary)),
            ]
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        for label, value in rows:
            grid.add_row(label, value)
        out.print(grid)
    elif not body["runs"]:
        out.print("No figures yet: HTCondor measures a job once it runs.")
    else:
        latest = body["runs"][-1]["samples"][-1]
        out.print(
            "Now: "
            + ", ".join(f"{title} {_figure(latest[key], scale)}" for key, title, scale in COLUMNS)
        )
    for item in body["advice"]:
        out.print(f"• {item['text']}")
    if body["clone_url"]:
        out.print(f"Clone with these settings: {obj.client.server}{body['clone_url']}")
    if show_samples:
        for run in body["runs"]:
            table = Table(
                box=None,
                header_style="bold",
                title_justify="left",
                title=f"Run from {run['started_at']} on {run['workstation'] or '?'}",
            )
            table.add_column("TIME")
            for _, title, _ in COLUMNS:
                table.add_column(title.upper())
            for sample in run["samples"]:
                table.add_row(
                    sample["time"][11:19],
                    *(_figure(sample[key], scale) for key, _, scale in COLUMNS),
                )
            out.print(table)


def _energy(summary: dict) -> str:
    """The GPUs' energy above idle, as the job page says it (older servers send none)."""
    kwh = summary.get("gpu_energy_kwh")
    if kwh is None:
        return "not measured"
    text = f"{kwh:.3g} kWh above idle"
    if summary.get("co2e_kg") is not None:
        text += f", {summary['co2e_kg'] * 1000:.3g} g CO2e"
    if summary.get("energy_simulated"):
        text += " (simulated GPUs)"
    return text
