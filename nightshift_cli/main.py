"""The `nightshift` command: submit training jobs, follow them and fetch their outputs."""

from __future__ import annotations

import getpass
import socket
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import click
from rich.table import Table
from rich.text import Text

from . import config
from .client import ApiError, Client, safe_destination
from .common import (
    EPILOG,
    EXIT_ERROR,
    EXIT_USAGE,
    STATE_STYLES,
    Context,
    asked_for,
    counted,
    describe_state,
    err,
    exit_status,
    follow_log,
    gpus_text,
    job_options,
    job_resolve,
    new_table,
    out,
    pass_context,
    print_json,
    report_submitted,
    request_fields,
    size_text,
    slug,
    transfer_progress,
    upload_file,
    when_text,
)
from .data_commands import data
from .environment_commands import env
from .experiment_commands import matrix, study, sweep, sweeps
from .model_commands import model
from .notify_commands import notify
from .template_commands import run, template
from .usage_commands import usage


class ApiAwareGroup(click.Group):
    """Shows the server's errors as its message, never as a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ApiError as exc:
            err.print(Text.assemble(("Error: ", "bold red"), exc.message))
            for field, messages in exc.fields.items():
                if exc.message.endswith(messages[0]) and len(exc.fields) == 1:
                    continue
                err.print(f"  {field}: {' '.join(messages)}", markup=False)
            if exc.status == 401:
                err.print("  Run `nightshift login` to sign in again.")
            sys.exit(EXIT_USAGE if exc.code == "invalid" else EXIT_ERROR)
        except KeyboardInterrupt:
            err.print("Interrupted; the job, if any, carries on in the pool.")
            sys.exit(130)


@click.group(cls=ApiAwareGroup, epilog=EPILOG)
@click.option(
    "--server", metavar="URL", help="The Nightshift portal, e.g. https://nightshift.example.edu."
)
@click.version_option(package_name="nightshift", prog_name="nightshift")
@click.pass_context
def cli(ctx: click.Context, server: str | None) -> None:
    """Run training jobs on your campus's idle GPU workstations."""
    ctx.obj = Context(server)


# -- signing in ----------------------------------------------------------------------------


@cli.command()
@click.option("--username", help="Your Nightshift username (asked for when not given).")
@click.option(
    "--with-token",
    is_flag=True,
    help="Paste a token from the portal's API tokens page instead of a password.",
)
@pass_context
def login(obj: Context, username: str | None, with_token: bool) -> None:
    """Sign in, and keep a token for the next commands (mode 0600)."""
    server = obj.settings.server
    if with_token:
        token = _read_secret("Token") if sys.stdin.isatty() else sys.stdin.readline().strip()
    else:
        username = username or click.prompt("Username")
        password = _read_secret("Password")
        anonymous = Client(server, None)
        try:
            created = anonymous.post(
                "/auth/token/",
                {
                    "username": username,
                    "password": password,
                    "name": f"nightshift CLI on {socket.gethostname()}"[:100],
                    "expires_in_days": 365,
                },
            )
        finally:
            anonymous.close()
        token = created["token"]
    client = Client(server, token)
    try:
        me = client.get("/me/")
    finally:
        client.close()
    path = config.save(server, token)
    out.print(f"Logged in to {server} as {me['username']}. The token is in {path}.")


def _read_secret(label: str) -> str:
    if sys.stdin.isatty():
        return getpass.getpass(f"{label}: ")
    return sys.stdin.readline().rstrip("\n")


@cli.command()
@pass_context
def logout(obj: Context) -> None:
    """Revoke the saved token on the server and forget it here."""
    if obj.settings.token and obj.settings.source != "NIGHTSHIFT_TOKEN":
        with _quiet_api_errors():
            for token in obj.client.get("/tokens/"):
                if token["status"] == "active" and obj.settings.token.startswith(token["prefix"]):
                    obj.client.delete(f"/tokens/{token['id']}/")
    out.print("Logged out." if config.forget() else "Nothing to log out of.")


@contextmanager
def _quiet_api_errors():
    try:
        yield
    except ApiError as exc:
        err.print(f"(The server could not revoke the token: {exc.message})")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def whoami(obj: Context, as_json: bool) -> None:
    """Who the saved token signs in as, and how many jobs they have."""
    me = obj.client.get("/me/")
    if as_json:
        print_json(me)
        return
    counts = ", ".join(f"{n} {state}" for state, n in sorted(me["jobs_by_state"].items()))
    out.print(f"{me['username']} on {obj.settings.server} ({counts or 'no jobs yet'})")
    for quota in me["quotas"]:
        limits = quota["limits"]
        hours = quota["gpu_hours_used"] + quota["gpu_hours_reserved"]
        budget = f"{limits['gpu_hours']:g}" if limits["gpu_hours"] is not None else "unlimited"
        out.print(
            f"  {quota['lab'] or 'No lab (site defaults)'}: {hours:.1f} of {budget} "
            f"GPU-hours in {limits['period_days']} days; {quota['gpus_in_use']} GPUs in "
            f"use; {quota['jobs_waiting']} jobs waiting"
        )


# -- submitting ----------------------------------------------------------------------------


@cli.command(epilog=EPILOG)
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@job_options
@click.option("--notify", is_flag=True, help="Email me when it ends or is held.")
@click.option("--wait", is_flag=True, help="Wait until the job ends; exit with its status.")
@click.option("--follow", is_flag=True, help="Stream its output until it ends (implies --wait).")
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@pass_context
def submit(
    obj: Context,
    path: Path,
    name: str | None,
    wait: bool,
    follow: bool,
    as_json: bool,
    requirements: Path | None,
    **fields: Any,
) -> None:
    """Submit a training script (.py), a project archive, or a project folder.

    \b
    nightshift submit train.py --gpus 1 --gpu-memory 10 --arg --epochs=5
    nightshift submit ./my-project --entry "python train.py --epochs 5" --follow
    """
    job = upload_file(obj, "/jobs/", path, name, requirements, request_fields(fields))
    report_submitted(obj, job, wait=wait, follow=follow, as_json=as_json)


# -- following -----------------------------------------------------------------------------


# -- reading -------------------------------------------------------------------------------


@cli.command("list")
@click.option(
    "--state",
    type=click.Choice(
        [
            "queued",
            "idle",
            "running",
            "transferring",
            "suspended",
            "held",
            "completed",
            "failed",
            "removed",
        ]
    ),
)
@click.option("--name", help="Only jobs whose name contains this.")
@click.option("--limit", type=click.IntRange(1, 200), default=25, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def list_jobs(obj: Context, state: str | None, name: str | None, limit: int, as_json: bool) -> None:
    """Your jobs, newest first."""
    page = obj.client.get("/jobs/", state=state, name=name, page_size=limit)
    if as_json:
        print_json(page["results"])
        return
    table = new_table("ID", "NAME", "STATE", "GPUS", "WORKSTATION", "SUBMITTED")
    for job in page["results"]:
        table.add_row(
            job["id"][:8],
            job["name"],
            Text(job["state"], style=STATE_STYLES.get(job["state"], "")),
            gpus_text(job["request"]),
            job["workstation"] or "",
            when_text(job["created_at"]),
        )
    out.print(table)
    if page["count"] > len(page["results"]):
        shown = f"{len(page['results'])} of {page['count']}; --limit shows more."
        err.print(Text(shown, style="dim"))


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def status(obj: Context, job_id: str, as_json: bool) -> None:
    """One job: its state, where it runs, and why it waits or is held."""
    job = job_resolve(obj.client, job_id)
    if as_json:
        print_json(job)
        return
    rows = [
        ("Job", f"{job['name']} ({job['id']})"),
        ("State", describe_state(job)),
        ("Detail", job["status_detail"]),
        ("Asked for", asked_for(job["request"])),
        ("Workstation", " ".join(filter(None, [job["workstation"], job["gpu_model"]]))),
        ("HTCondor id", job["condor_id"]),
        ("Submitted", when_text(job["created_at"])),
        ("Started", when_text(job["started_at"])),
        ("Finished", when_text(job["finished_at"])),
        ("Exit code", "" if job["exit_code"] is None else str(job["exit_code"])),
        ("Web page", job["links"]["web"]),
    ]
    if job.get("hold"):
        rows.insert(2, ("Held", f"{job['hold']['title']} {job['hold']['advice']}"))
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for label, value in rows:
        if value:
            table.add_row(label, value)
    out.print(table)


@cli.command()
@click.argument("job_id")
@click.option(
    "--stream",
    type=click.Choice(["stdout", "stderr", "install"]),
    default="stdout",
    show_default=True,
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the job ends.")
@pass_context
def logs(obj: Context, job_id: str, stream: str, follow: bool) -> None:
    """Print a job's output."""
    job = job_resolve(obj.client, job_id)
    if follow:
        job = follow_log(obj.client, job, stream)
        sys.exit(exit_status(job) if job["is_final"] or job["state"] == "held" else 0)
    offset = 0
    while True:
        chunk = obj.client.get(f"/jobs/{job['id']}/logs/{stream}/", offset=offset)
        sys.stdout.write(chunk["text"])
        offset = chunk["offset"]
        if offset >= chunk["size"] or not chunk["text"]:
            break


@cli.command()
@click.argument("job_id")
@click.option(
    "--to",
    "target",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to save into (default: ./<job name>-<id>).",
)
@click.option("--zip", "as_zip", is_flag=True, help="Save one zip of every output instead.")
@pass_context
def download(obj: Context, job_id: str, target: Path | None, as_zip: bool) -> None:
    """Download a job's output files."""
    job = job_resolve(obj.client, job_id)
    target = target or Path(f"{slug(job['name']) or 'job'}-{job['id'][:8]}")
    files = obj.client.get(f"/jobs/{job['id']}/outputs/")
    if not files:
        hint = "" if job["is_final"] else " yet; it has not ended"
        err.print(f"“{job['name']}” has no output files{hint}.")
        return
    target.mkdir(parents=True, exist_ok=True)
    if as_zip:
        destination = target / f"outputs-{job['id'][:8]}.zip"
        _save(obj.client, f"/jobs/{job['id']}/outputs.zip", destination, destination.name)
        out.print(f"Saved {destination}")
        return
    for item in files:
        destination = safe_destination(target, item["path"])
        destination.parent.mkdir(parents=True, exist_ok=True)
        _save(obj.client, f"/jobs/{job['id']}/outputs/{item['path']}", destination, item["path"])
    total = sum(item["size"] for item in files)
    out.print(f"Saved {counted(len(files), 'file')}, {size_text(total)}, in {target}/")


def _save(client: Client, path: str, destination: Path, label: str) -> None:
    """Download to a temporary name, then rename: a broken transfer leaves no half file."""
    partial = destination.with_name(destination.name + ".part")
    with ExitStack() as stack:
        for total, chunks in client.stream(path):
            progress = None
            if err.is_terminal and (total or 0) > 1024 * 1024:
                progress = stack.enter_context(transfer_progress())
                task = progress.add_task(label, total=total)
            with partial.open("wb") as sink:
                for chunk in chunks:
                    sink.write(chunk)
                    if progress is not None:
                        progress.advance(task, len(chunk))
    partial.replace(destination)


def _action(name: str, summary: str, done: str):
    @cli.command(name, help=summary)
    @click.argument("job_id")
    @pass_context
    def command(obj: Context, job_id: str) -> None:
        job = job_resolve(obj.client, job_id)
        job = obj.client.post(f"/jobs/{job['id']}/{name}/")
        out.print(f"{done} “{job['name']}” ({job['id'][:8]}).")

    return command


cancel = _action("cancel", "Cancel a job; HTCondor removes it from the pool.", "Cancelling")
hold = _action("hold", "Hold a job until you release it.", "Holding")
release = _action("release", "Release a held job: it goes back to the queue.", "Released")


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the new job as JSON.")
@pass_context
def rerun(obj: Context, job_id: str, as_json: bool) -> None:
    """Run a job again with the same files and settings."""
    job = job_resolve(obj.client, job_id)
    new = obj.client.post(f"/jobs/{job['id']}/rerun/")
    if as_json:
        print_json(new)
    else:
        out.print(f"Submitted “{new['name']}” as {new['id']}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def pool(obj: Context, as_json: bool) -> None:
    """The pool's workstations and GPUs, and the software environments offered."""
    overview = obj.client.get("/pool/")
    if as_json:
        print_json(overview)
        return
    if overview["error"]:
        err.print(Text.assemble(("The pool did not answer: ", "yellow"), overview["error"]))
    table = new_table("WORKSTATION", "STATUS", "GPUS FREE", "GPU", "GPU MEMORY", "CPUS FREE")
    for station in overview["workstations"]:
        gpu = station["gpu"] or {}
        table.add_row(
            station["name"],
            station["status_label"],
            f"{station['free_gpus']}/{station['total_gpus']}" if station["total_gpus"] else "-",
            gpu.get("name", "-"),
            f"{gpu['memory_mb'] / 1024:.0f} GB" if gpu else "-",
            f"{station['free_cpus']}/{station['total_cpus']}",
        )
    out.print(table)
    out.print(
        f"{overview['free_gpus']} of {overview['total_gpus']} GPUs free; "
        f"{overview['nightshift_gpus']} running Nightshift jobs."
    )
    environments = ", ".join(
        e["reference"] + (" (default)" if e["is_default"] else "") for e in overview["environments"]
    )
    out.print(f"Software environments: {environments or 'none'}")


REPORT_TABLES = (
    "usage",
    "over_time",
    "outcomes",
    "waits",
    "losses",
    "utilization_hour",
    "utilization_weekday",
)


@cli.command()
@click.option(
    "--period",
    type=click.Choice(["7d", "30d", "month", "custom"]),
    help="Default the last 30 days; --month or --from/--to choose for you.",
)
@click.option("--month", metavar="YYYY-MM", help="A calendar month.")
@click.option("--from", "start", metavar="YYYY-MM-DD", help="First day of a custom range.")
@click.option("--to", "end", metavar="YYYY-MM-DD", help="Last day of a custom range.")
@click.option(
    "--group",
    type=click.Choice(["user", "lab", "workstation", "gpu_model"]),
    default="user",
    show_default=True,
)
@click.option("--lab", help="One of your labs, by name or id (default: all you may read).")
@click.option(
    "--table",
    type=click.Choice([*REPORT_TABLES, "records"]),
    default="usage",
    show_default=True,
    help="The table to print or save.",
)
@click.option(
    "--csv",
    "csv_to",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Save the table as CSV to this file instead (with --table records: every "
    "run of the period).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole report as JSON.")
@pass_context
def report(
    obj: Context,
    period: str | None,
    month: str | None,
    start: str | None,
    end: str | None,
    group: str,
    lab: str | None,
    table: str,
    csv_to: Path | None,
    as_json: bool,
) -> None:
    """Usage of your labs: GPU-hours, outcomes, waits, losses (lab leads and admins)."""
    period = period or ("month" if month else "custom" if start or end else "30d")
    params = {
        "period": period,
        "month": month,
        "start": start,
        "end": end,
        "group": group,
        "lab": lab,
    }
    params = {key: value for key, value in params.items() if value is not None}
    if csv_to is not None:
        _save(obj.client, f"/reports/{table}.csv?{urlencode(params)}", csv_to, table)
        out.print(f"Saved the {table} table to {csv_to}")
        return
    if table == "records":
        raise click.UsageError("Every run of the period is a CSV: add --csv FILE.")
    body = obj.client.get("/reports/", **params)
    if as_json:
        print_json(body)
        return
    totals = body["totals"]
    out.print(Text(f"{body['scope']} · {body['period']['label']}", style="bold"))
    wait = totals["median_wait_minutes"]
    goodput = totals["goodput_percent"]
    out.print(
        f"{totals['gpu_hours']:.1f} GPU-hours · {totals['jobs_ended']} jobs ended "
        f"({totals['completed']} completed) · goodput "
        f"{'-' if goodput is None else f'{goodput:.1f} %'} · "
        f"{totals['lost_gpu_hours']:.1f} GPU-hours lost to evictions · median wait "
        f"{'-' if wait is None else f'{wait:.1f} min'}"
    )
    chosen = body["tables"][table]
    grid = Table(
        box=None, header_style="bold", pad_edge=False, title=chosen["title"], title_justify="left"
    )
    for column in chosen["columns"]:
        grid.add_column(column["heading"].upper())
    for row in chosen["rows"]:
        grid.add_row(
            *("-" if row.get(c["key"]) is None else str(row[c["key"]]) for c in chosen["columns"])
        )
    out.print(grid)


for command in (sweep, matrix, study, sweeps, env, data, model, template, run, usage, notify):
    cli.add_command(command)


def main() -> None:  # pragma: no cover - the console script's entry point
    cli()
