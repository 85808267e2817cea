"""The `nightshift` command: submit training jobs, follow them and fetch their outputs."""

from __future__ import annotations

import csv
import getpass
import json
import re
import socket
import sys
import tarfile
import tempfile
import time
import uuid
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table
from rich.text import Text

from . import config
from .client import ApiError, Client, ProgressReader, safe_destination

# Markup is off: job names and server messages are printed as they are, never interpreted.
out = Console(highlight=False, soft_wrap=True, markup=False)
err = Console(stderr=True, highlight=False, markup=False)

# Exit statuses besides the job's own exit code.
EXIT_ERROR = 1  # the server refused, or could not be reached
EXIT_USAGE = 2  # bad input, from click or from the server's validation
EXIT_REMOVED = 3  # the job was cancelled or removed
EXIT_HELD = 4  # the job is held and waits for you
FINAL_STATES = {"completed", "failed", "removed"}
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")
# Left out when a project folder is archived: they are large and never needed to train.
SKIPPED_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules",
                ".ipynb_checkpoints", ".mypy_cache", ".pytest_cache", ".ruff_cache"}  # fmt: skip
POLL_SECONDS = 2.0

EPILOG = f"""\b
The server and token come from `nightshift login`, or from NIGHTSHIFT_URL and
NIGHTSHIFT_TOKEN. Exit status with --wait or --follow: 0 when the job completed,
the job's exit code when it failed, {EXIT_REMOVED} when it was removed, {EXIT_HELD} when it is held;
{EXIT_ERROR} when the server refused or could not be reached, {EXIT_USAGE} for bad input."""


class Context:
    def __init__(self, server: str | None) -> None:
        self.settings = config.load(server)
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            if not self.settings.token:
                raise ApiError(
                    f"Not logged in to {self.settings.server}. Run `nightshift login`, "
                    "or set NIGHTSHIFT_TOKEN.", code="not_authenticated",
                )  # fmt: skip
            self._client = Client(self.settings.server, self.settings.token)
        return self._client


pass_context = click.make_pass_decorator(Context)


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
            created = anonymous.post("/auth/token/", {
                "username": username, "password": password,
                "name": f"nightshift CLI on {socket.gethostname()}"[:100], "expires_in_days": 365,
            })  # fmt: skip
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
        _print_json(me)
        return
    counts = ", ".join(f"{n} {state}" for state, n in sorted(me["jobs_by_state"].items()))
    out.print(f"{me['username']} on {obj.settings.server} ({counts or 'no jobs yet'})")
    for quota in me["quotas"]:
        limits = quota["limits"]
        hours = quota["gpu_hours_used"] + quota["gpu_hours_reserved"]
        budget = f"{limits['gpu_hours']:g}" if limits["gpu_hours"] is not None else "unlimited"
        out.print(f"  {quota['lab'] or 'No lab (site defaults)'}: {hours:.1f} of {budget} "
                  f"GPU-hours in {limits['period_days']} days; {quota['gpus_in_use']} GPUs in "
                  f"use; {quota['jobs_waiting']} jobs waiting")  # fmt: skip


# -- submitting ----------------------------------------------------------------------------


def job_options(command):
    """The options that describe what to run and on what: `submit` and `sweep` share them."""
    for option in reversed(
        [
            click.option(
                "--name", help="A name you will recognise (default: the file or folder name)."
            ),
            click.option(
                "--gpus", type=int, default=1, show_default=True, help="GPUs; 0 for CPUs only."
            ),
            click.option(
                "--gpu-memory", type=float, metavar="GB", help="Minimum memory of each GPU."
            ),
            click.option(
                "--gpu-capability", type=float, metavar="X.Y", help="Minimum compute capability."
            ),
            click.option("--cpus", type=int, default=1, show_default=True),
            click.option(
                "--memory",
                type=float,
                default=2.0,
                show_default=True,
                metavar="GB",
                help="Main memory.",
            ),
            click.option(
                "--max-runtime",
                type=int,
                metavar="MINUTES",
                help="Hold the job if it runs longer than this.",
            ),
            click.option(
                "--arg",
                "arguments",
                multiple=True,
                metavar="ARG",
                help="An argument for the script; repeat for more, e.g. --arg --epochs=5.",
            ),
            click.option(
                "--env",
                "environment",
                multiple=True,
                metavar="KEY=VALUE",
                help="An environment variable; repeat for more.",
            ),
            click.option(
                "--entry",
                "entry_command",
                metavar="COMMAND",
                help="For a project: how to start it (default: python train.py).",
            ),
            click.option(
                "--requirements",
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                help="For a single script: a requirements.txt to install first.",
            ),
            click.option(
                "--keep",
                "keep_outputs",
                multiple=True,
                metavar="PATH",
                help="A file or folder to keep as output (default: outputs).",
            ),
            click.option(
                "--environment",
                "environment_preset",
                metavar="NAME",
                help="A software environment from `nightshift pool`.",
            ),
            click.option(
                "--lab", help="The lab to charge, when you are in several (see `whoami`)."
            ),
        ]
    ):
        command = option(command)
    return command


@cli.command(epilog=EPILOG)
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@job_options
@click.option("--notify", is_flag=True, help="Email me when it ends or is held.")
@click.option("--wait", is_flag=True, help="Wait until the job ends; exit with its status.")
@click.option("--follow", is_flag=True, help="Stream its output until it ends (implies --wait).")
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@pass_context
def submit(obj: Context, path: Path, name: str | None, wait: bool, follow: bool, as_json: bool,
           requirements: Path | None, **fields: Any) -> None:  # fmt: skip
    """Submit a training script (.py), a project archive, or a project folder.

    \b
    nightshift submit train.py --gpus 1 --gpu-memory 10 --arg --epochs=5
    nightshift submit ./my-project --entry "python train.py --epochs 5" --follow
    """
    job = _upload(obj, "/jobs/", path, name, requirements, _request_fields(fields))
    if as_json and not (wait or follow):
        _print_json(job)
        return
    err.print(f"Submitted “{job['name']}” as {job['id']}  ({job['links']['web']})")
    if follow:
        job = _follow_log(obj.client, job, "stdout")
    elif wait:
        job = _wait(obj.client, job)
    else:
        return
    if as_json:
        _print_json(job)
    sys.exit(_exit_status(job))


def _upload(obj: Context, endpoint: str, path: Path, name: str | None,
            requirements: Path | None, data: dict[str, Any]) -> Any:  # fmt: skip
    """POST a script, archive or folder (archived on the way) with the request's fields."""
    data["name"] = name or path.resolve().name
    with ExitStack() as stack:
        upload = path
        if path.is_dir():
            data.setdefault("entry_command", _default_entry(path))
            upload = _archive_folder(path, stack)
        elif path.name.lower().endswith(ARCHIVE_SUFFIXES):
            data.setdefault("entry_command", "python train.py")
        files = {"script": _progress_file(upload, stack, label=f"Uploading {path.name}")}
        if requirements is not None:
            files["requirements"] = (
                requirements.name,
                stack.enter_context(requirements.open("rb")),
            )
        return obj.client.upload(endpoint, data, files)


@cli.command(epilog=EPILOG)
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@job_options
@click.option(
    "--grid",
    multiple=True,
    metavar="NAME=V1,V2,...",
    help="A parameter and its values; every combination runs. Repeat for more.",
)
@click.option(
    "--rows",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A CSV file: parameter names in its header, then one run per row.",
)
@click.option("--random", "random_", multiple=True, metavar="NAME=KIND:LOW:HIGH",
              help="A parameter drawn at random: uniform, log_uniform or int_uniform with "
              "its range, or NAME=choice:a|b|c. Repeat for more; with --count.")  # fmt: skip
@click.option("--count", type=int, help="How many random samples to run.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the samples.")
@click.option("--json", "as_json", is_flag=True, help="Print the sweep as JSON.")
@pass_context
def sweep(obj: Context, path: Path, name: str | None, requirements: Path | None,
          grid: tuple[str, ...], rows: Path | None, random_: tuple[str, ...], count: int | None,
          seed: int, as_json: bool, **fields: Any) -> None:  # fmt: skip
    """Submit many runs of one script, one per parameter set, as one sweep.

    Write {name} in --arg, --env or --entry where a parameter's value goes.

    \b
    nightshift sweep train.py --arg=--lr={lr} --grid lr=0.1,0.01,0.001 --grid batch=32,64
    nightshift sweep train.py --arg=--lr={lr} --random lr=log_uniform:1e-5:0.1 --count 20
    nightshift sweep ./project --entry "python eval.py {system} {data}" --rows matrix.csv
    """
    parameters = _sweep_parameters(grid, rows, random_, count, seed)
    data = _request_fields(fields) | {"parameters": json.dumps(parameters)}
    created = _upload(obj, "/sweeps/", path, name, requirements, data)
    if as_json:
        _print_json(created)
        return
    err.print(f"Submitted sweep “{created['name']}” with {created['run_count']} runs as "
              f"{created['id']}  ({created['links']['web']})")  # fmt: skip


@cli.command(epilog=EPILOG)
@job_options
@click.option(
    "--system",
    "systems",
    multiple=True,
    metavar="NAME=PATH",
    help="A system to evaluate: a script, archive or project folder. Repeat.",
)
@click.option(
    "--system-entry",
    multiple=True,
    metavar="NAME=COMMAND",
    help="How to start a project system, e.g. bert='python eval.py --data {dataset}'.",
)
@click.option(
    "--dataset",
    "datasets",
    multiple=True,
    metavar="NAME=FILE",
    help="A dataset to upload: a file or an archive, unpacked into dataset/. Repeat.",
)
@click.option(
    "--dataset-path",
    multiple=True,
    metavar="NAME=PATH",
    help="A dataset the workstations already see, by its path. Repeat.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the sweep as JSON.")
@pass_context
def matrix(obj: Context, name: str | None, requirements: Path | None, systems: tuple[str, ...],
           system_entry: tuple[str, ...], datasets: tuple[str, ...],
           dataset_path: tuple[str, ...], as_json: bool, **fields: Any) -> None:  # fmt: skip
    """Evaluate every system on every dataset: an evaluation matrix, as one sweep.

    {dataset} in --arg or a --system-entry becomes the dataset's path (or dataset/, where
    an uploaded one is unpacked), {system} the system's name.

    \b
    nightshift matrix --system bert=./bert --system t5=./t5 \\
        --system-entry "bert=python eval.py --data {dataset}" \\
        --dataset-path squad=/shared/squad --dataset glue=glue.tar.gz --gpus 1
    """
    if requirements is not None or fields.get("entry_command"):
        raise click.UsageError("Give each system its entry with --system-entry NAME=COMMAND.")
    if not systems or not (datasets or dataset_path):
        raise click.UsageError("Give at least one --system and one --dataset or --dataset-path.")
    entries = dict(_pair(item, "--system-entry") for item in system_entry)
    data = _request_fields({k: v for k, v in fields.items() if k != "entry_command"})
    data["name"] = name or "evaluation"
    system_list, dataset_list, files = [], [], []
    with ExitStack() as stack:
        names_seen: set[str] = set()

        def add_file(field: str, path: Path, number: int) -> str:
            upload = path
            if path.is_dir():
                upload = _archive_folder(path, stack)
            filename = upload.name if upload.name not in names_seen else f"{number}-{upload.name}"
            names_seen.add(filename)
            files.append((field, (filename, stack.enter_context(upload.open("rb")))))
            return filename

        for number, item in enumerate(systems):
            system, location = _pair(item, "--system")
            path = Path(location)
            if not path.exists():
                raise click.UsageError(f"--system {item!r}: {location} does not exist.")
            entry = entries.pop(system, None)
            if entry is None and (path.is_dir() or path.name.lower().endswith(ARCHIVE_SUFFIXES)):
                entry = _default_entry(path) if path.is_dir() else "python train.py"
            system_list.append({"name": system, "file": add_file("system_files", path, number),
                                "entry_command": entry})  # fmt: skip
        if entries:
            raise click.UsageError(f"--system-entry names no system: {', '.join(entries)}.")
        for number, item in enumerate(datasets):
            dataset, location = _pair(item, "--dataset")
            path = Path(location)
            if not path.is_file():
                raise click.UsageError(f"--dataset {item!r}: {location} is not a file.")
            dataset_list.append({"name": dataset,
                                 "file": add_file("dataset_files", path, number)})  # fmt: skip
        for item in dataset_path:
            dataset, location = _pair(item, "--dataset-path")
            dataset_list.append({"name": dataset, "path": location})
        data["systems"], data["datasets"] = json.dumps(system_list), json.dumps(dataset_list)
        created = obj.client.upload("/sweeps/matrix/", data, files)
    if as_json:
        _print_json(created)
        return
    err.print(f"Submitted “{created['name']}”: {len(system_list)} systems by "
              f"{len(dataset_list)} datasets, {created['run_count']} runs, as {created['id']}  "
              f"({created['links']['web']})")  # fmt: skip


@cli.command(epilog=EPILOG)
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@job_options
@click.option("--space", multiple=True, metavar="NAME=KIND:LOW:HIGH",
              help="A hyperparameter to search: uniform, log_uniform or int_uniform with its "
              "range, or NAME=choice:a|b|c. Repeat.")  # fmt: skip
@click.option("--objective", required=True, help="The metric to optimise, as nightshift.log "
              "logs it.")  # fmt: skip
@click.option("--maximize", is_flag=True, help="Maximise the objective (default: minimise).")
@click.option("--trials", type=int, default=20, show_default=True, help="At most this many.")
@click.option("--parallel", type=int, default=4, show_default=True, help="Trials at once.")
@click.option("--sampler", type=click.Choice(["tpe", "random"]), default="tpe", show_default=True)
@click.option("--pruner", type=click.Choice(["median", "asha", "none"]), default="median",
              show_default=True)  # fmt: skip
@click.option("--gpu-hours", type=float, help="Stop once the trials used this many.")
@click.option("--deadline", type=int, metavar="MINUTES", help="Stop after this long.")
@click.option("--seed", type=int, help="Seed of the sampler.")
@click.option("--json", "as_json", is_flag=True, help="Print the study as JSON.")
@pass_context
def study(obj: Context, path: Path, name: str | None, requirements: Path | None,
          space: tuple[str, ...], objective: str, maximize: bool, trials: int, parallel: int,
          sampler: str, pruner: str, gpu_hours: float | None, deadline: int | None,
          seed: int | None, as_json: bool, **fields: Any) -> None:  # fmt: skip
    """Search hyperparameters with Optuna: each trial is a job, PARALLEL at a time.

    Write {name} in --arg or --env where a hyperparameter goes; the script logs the
    objective with nightshift.log() and may stop early when nightshift.should_stop().

    \b
    nightshift study train.py --arg=--lr={lr} --space lr=log_uniform:1e-5:0.1 \\
        --objective val_loss --trials 40 --parallel 4 --gpus 1
    """
    if not space:
        raise click.UsageError("Give at least one --space NAME=KIND:LOW:HIGH.")
    plan = {"space": _distributions(space, "--space"), "objective": objective,
            "direction": "maximize" if maximize else "minimize", "sampler": sampler,
            "pruner": pruner, "parallel": parallel, "max_trials": trials,
            "gpu_hours": gpu_hours, "deadline_minutes": deadline, "seed": seed}  # fmt: skip
    data = _request_fields(fields) | {"study": json.dumps(plan)}
    created = _upload(obj, "/sweeps/study/", path, name, requirements, data)
    if as_json:
        _print_json(created)
        return
    err.print(f"Started study “{created['name']}” as {created['id']}: up to {trials} trials, "
              f"{parallel} at a time  ({created['links']['web']})")  # fmt: skip


def _pair(item: str, option: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep or not name or not value:
        raise click.UsageError(f"{option} {item!r}: write NAME=VALUE.")
    return name, value


def _distributions(items: tuple[str, ...], option: str) -> dict[str, dict]:
    """NAME=KIND:LOW:HIGH or NAME=choice:a|b|c -> the API's distributions."""
    distributions: dict[str, dict] = {}
    for item in items:
        key, sep, spec = item.partition("=")
        kind, _, bounds = spec.partition(":")
        if not sep or not key or not bounds:
            raise click.UsageError(f"{option} {item!r}: write NAME=KIND:LOW:HIGH or "
                                   "NAME=choice:a|b|c.")  # fmt: skip
        if kind == "choice":
            distributions[key] = {"kind": "choice",
                                  "choices": [_value(c) for c in bounds.split("|")]}  # fmt: skip
            continue
        low, _, high = bounds.partition(":")
        try:
            distributions[key] = {"kind": kind, "low": float(low), "high": float(high)}
        except ValueError:
            raise click.UsageError(f"{option} {item!r}: LOW and HIGH are numbers.") from None
    return distributions


def _value(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _sweep_parameters(grid: tuple[str, ...], rows: Path | None, random_: tuple[str, ...],
                      count: int | None, seed: int) -> dict[str, Any]:  # fmt: skip
    given = [kind for kind, value in (("--grid", grid), ("--rows", rows), ("--random", random_))
             if value]  # fmt: skip
    if len(given) != 1:
        raise click.UsageError("Give the runs with one of --grid, --rows or --random.")
    if grid:
        values = {}
        for item in grid:
            key, sep, listed = item.partition("=")
            if not sep or not key:
                raise click.UsageError(f"--grid {item!r}: write NAME=V1,V2,...")
            values[key] = [_value(v.strip()) for v in listed.split(",") if v.strip()]
        return {"grid": values}
    if rows:
        with rows.open(newline="") as source:
            table = list(csv.DictReader(source))
        return {"rows": [{k: _value(v) for k, v in row.items()} for row in table]}
    distributions = _distributions(random_, "--random")
    if count is None:
        raise click.UsageError("--random needs --count, the number of runs.")
    return {"random": distributions, "count": count, "seed": seed}


@cli.command()
@click.argument("sweep_id", required=False)
@click.option("--cancel", is_flag=True, help="Cancel every run of the sweep that has not ended.")
@click.option("--results", is_flag=True, help="Compare the runs by a metric they logged.")
@click.option("--metric", help="With --results: the metric (default: the first logged).")
@click.option("--sort", default="index", show_default=True,
              help="With --results: index, best, final, state, gpu_hours or p.NAME; -X "
              "descending.")  # fmt: skip
@click.option("--csv", "csv_file", type=click.Path(dir_okay=False, path_type=Path),
              help="With --results: save the comparison as CSV.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def sweeps(obj: Context, sweep_id: str | None, cancel: bool, results: bool, metric: str | None,
           sort: str, csv_file: Path | None, as_json: bool) -> None:  # fmt: skip
    """Your sweeps, one sweep's runs with their parameters and states, or (--results) its
    runs compared by a metric."""
    if (cancel or results or csv_file) and sweep_id is None:
        raise click.UsageError("--cancel and --results need the sweep's ID.")
    if results or csv_file:
        _sweep_results(obj, sweep_id, metric, sort, csv_file, as_json)
        return
    if cancel:
        found = obj.client.post(f"/sweeps/{sweep_id}/cancel/")
        err.print(f"Cancelling the runs of “{found['name']}” that had not ended.")
    if sweep_id is None:
        listed = obj.client.get("/sweeps/")["results"]
        if as_json:
            _print_json(listed)
            return
        table = Table(box=None, header_style="bold", pad_edge=False)
        for column in ("ID", "NAME", "KIND", "RUNS", "CLUSTER"):
            table.add_column(column)
        for item in listed:
            table.add_row(item["id"][:8], item["name"], item["kind"], str(item["run_count"]),
                          str(item["cluster_id"] or "-"))  # fmt: skip
        out.print(table)
        return
    found = obj.client.get(f"/sweeps/{sweep_id}/") if not cancel else found
    if as_json:
        _print_json(found)
        return
    names = list(found["runs"][0]["parameters"]) if found["runs"] else []
    states = ", ".join(f"{n} {state}" for state, n in sorted(found["states"].items()))
    out.print(f"{found['name']}: {found['run_count']} runs ({states})")
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("#", *names, "STATE", "WORKSTATION", "EXIT"):
        table.add_column(column)
    for run in found["runs"]:
        exit_code = "" if run["exit_code"] is None else str(run["exit_code"])
        table.add_row(str(run["index"]), *(str(run["parameters"].get(n, "")) for n in names),
                      run["state"], run["workstation"] or "-", exit_code)  # fmt: skip
    out.print(table)


def _sweep_results(obj: Context, sweep_id: str, metric: str | None, sort: str,
                   csv_file: Path | None, as_json: bool) -> None:  # fmt: skip
    if csv_file is not None:
        query = urlencode({"sort": sort, **({"metric": metric} if metric else {})})
        for _, chunks in obj.client.stream(f"/sweeps/{sweep_id}/results.csv?{query}"):
            csv_file.write_bytes(b"".join(chunks))
        err.print(f"Saved the comparison to {csv_file}")
        return
    found = obj.client.get(f"/sweeps/{sweep_id}/results/", metric=metric, sort=sort)
    if as_json:
        _print_json(found)
        return
    if found["metric"] is None:
        out.print("No run has logged a metric yet.")
    table = Table(box=None, header_style="bold", pad_edge=False)
    metric_name = found["metric"] or "metric"
    for column in ("#", *found["parameters"], "STATE", f"FINAL {metric_name}",
                   f"BEST {metric_name}", "GPU-H"):  # fmt: skip
        table.add_column(column)
    best = found["best"]["index"] if found["best"] else None
    for run in found["runs"]:
        mark = " *" if run["index"] == best else ""
        table.add_row(f"{run['index']}{mark}",
                      *(str(run["parameters"].get(n, "")) for n in found["parameters"]),
                      run["state"], _number(run["final"]), _number(run["best"]),
                      f"{run['gpu_hours']:.2f}")  # fmt: skip
    out.print(table)
    if found["best"]:
        goal = "lowest" if found["goal"] == "min" else "highest"
        out.print(
            f"* best ({goal} {metric_name}): run {best}, "
            + ", ".join(f"{k}={v}" for k, v in found["best"]["parameters"].items())
        )


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _request_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The API's multipart fields for the options given; lists repeat their field."""
    names = {"gpu_memory": "gpu_memory_gb", "gpu_capability": "gpu_capability",
             "memory": "memory_gb", "max_runtime": "max_runtime_minutes"}  # fmt: skip
    data: dict[str, Any] = {}
    for option, value in fields.items():
        if value is None or value == () or value is False:
            continue
        key = names.get(option, option)
        data[key] = list(value) if isinstance(value, tuple) else (
            "true" if value is True else str(value))  # fmt: skip
    return data


def _default_entry(folder: Path) -> str:
    for candidate in ("train.py", "main.py"):
        if (folder / candidate).is_file():
            return f"python {candidate}"
    raise click.UsageError(
        f"{folder} has no train.py or main.py; say how to start it, e.g. "
        "--entry 'python src/run.py --epochs 5'."
    )


def _archive_folder(folder: Path, stack: ExitStack) -> Path:
    """The folder as a .tar.gz in a temporary file, without VCS and cache folders."""
    temporary = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nightshift-")))
    target = temporary / f"{_slug(folder.resolve().name) or 'project'}.tar.gz"
    skipped_links = []
    with tarfile.open(target, "w:gz") as archive:
        for item in sorted(folder.rglob("*")):
            relative = item.relative_to(folder)
            if any(part in SKIPPED_DIRS for part in relative.parts):
                continue
            if item.is_symlink():
                skipped_links.append(str(relative))
                continue
            if item.is_file() or item.is_dir():
                archive.add(item, arcname=str(relative), recursive=False)
    if skipped_links:
        err.print(f"Left out {len(skipped_links)} symbolic link(s): {', '.join(skipped_links[:5])}")
    return target


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._-")[:60]


def _progress_file(path: Path, stack: ExitStack, *, label: str) -> tuple[str, Any]:
    size = path.stat().st_size
    stream = stack.enter_context(path.open("rb"))
    if size < 1024 * 1024 or not err.is_terminal:
        return path.name, stream
    progress = stack.enter_context(_transfer_progress())
    task = progress.add_task(label, total=size)
    return path.name, ProgressReader(stream, lambda n: progress.advance(task, n))


def _transfer_progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        TimeRemainingColumn(), console=err, transient=True,
    )  # fmt: skip


# -- following -----------------------------------------------------------------------------


def _describe_state(job: dict) -> str:
    text = f"{job['state_label']}"
    if job.get("workstation") and job["state"] == "running":
        text += f" on {job['workstation']}"
    if job.get("match_problem"):
        text += f" — {job['match_problem']}"
    elif job.get("wait_reason") and job["state"] in ("idle", "queued"):
        text += f" — {job['wait_reason']}"
    return text


def _report_change(job: dict, previous: str | None) -> str:
    described = _describe_state(job)
    if described != previous:
        err.print(Text.assemble((_now(), "dim"), " ", described))
    return described


def _now() -> str:
    return datetime.now().strftime("%H:%M:%S")


def _wait(client: Client, job: dict) -> dict:
    previous = None
    while True:
        previous = _report_change(job, previous)
        if job["is_final"] or job["state"] == "held":
            return job
        time.sleep(POLL_SECONDS)
        job = client.get(f"/jobs/{job['id']}/")


def _follow_log(client: Client, job: dict, stream: str) -> dict:
    """Print the log as it grows until the job ends; reports state changes on stderr."""
    offset, previous = 0, None
    while True:
        previous = _report_change(job, previous)
        while True:
            chunk = client.get(f"/jobs/{job['id']}/logs/{stream}/", offset=offset)
            if chunk["text"]:
                sys.stdout.write(chunk["text"])
                sys.stdout.flush()
            offset = chunk["offset"]
            if offset >= chunk["size"]:
                break
        if job["is_final"] or job["state"] == "held":
            if job["is_final"] and not job["outputs_ready"] and job["state"] != "removed":
                # The last lines arrive with the outputs; read once more when they do.
                job = _wait_for_outputs(client, job)
                chunk = client.get(f"/jobs/{job['id']}/logs/{stream}/", offset=offset)
                sys.stdout.write(chunk["text"])
                sys.stdout.flush()
            return job
        time.sleep(POLL_SECONDS / 2)
        job = client.get(f"/jobs/{job['id']}/")


def _wait_for_outputs(client: Client, job: dict, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while not job["outputs_ready"] and time.monotonic() < deadline:
        time.sleep(1)
        job = client.get(f"/jobs/{job['id']}/")
    return job


def _exit_status(job: dict) -> int:
    state = job["state"]
    if state == "completed":
        return 0
    if state == "held":
        hold = job.get("hold") or {}
        err.print(
            Text.assemble(("Held: ", "bold yellow"), hold.get("title") or job["status_detail"])
        )
        if hold.get("advice"):
            err.print(f"  {hold['advice']}")
        err.print(f"  Release it with `nightshift release {job['id'][:8]}` once fixed.")
        return EXIT_HELD
    if state == "removed":
        err.print(f"Removed: {job['status_detail']}")
        return EXIT_REMOVED
    if job.get("exit_signal"):
        detail = f"killed by signal {job['exit_signal']}."
    elif job.get("exit_code") is not None:
        detail = f"the script exited with code {job['exit_code']}."
    else:
        detail = job["status_detail"] or "the job did not complete."
    err.print(Text.assemble(("Failed: ", "bold red"), detail))
    err.print(f"  Its errors: nightshift logs {job['id'][:8]} --stream stderr")
    if job.get("exit_signal"):
        return 128 + job["exit_signal"]
    code = job.get("exit_code")
    return code if isinstance(code, int) and 0 < code < 256 else EXIT_ERROR


# -- reading -------------------------------------------------------------------------------


def _resolve(client: Client, job_id: str) -> dict:
    """A job by its full id or by the start of it, as `nightshift list` shows it."""
    try:
        return client.get(f"/jobs/{uuid.UUID(job_id)}/")
    except ValueError:
        pass
    if not re.fullmatch(r"[0-9a-fA-F-]{4,36}", job_id):
        raise ApiError(f"{job_id!r} is not a job id; `nightshift list` shows them.", code="invalid")
    found = client.get("/jobs/", id_prefix=job_id, page_size=2)
    if found["count"] == 0:
        raise ApiError(f"You have no job whose id starts with {job_id}.", code="not_found")
    if found["count"] > 1:
        raise ApiError(f"{job_id} matches {found['count']} jobs; give more of the id.",
                       code="invalid")  # fmt: skip
    return found["results"][0]


def _when(value: str | None) -> str:
    if not value:
        return ""
    return datetime.fromisoformat(value).astimezone().strftime("%Y-%m-%d %H:%M")


def _gpus(request: dict) -> str:
    if not request["gpus"]:
        return "CPU"
    text = f"{request['gpus']}"
    if request.get("gpu_memory_gb"):
        text += f" ≥{request['gpu_memory_gb']:g}GB"
    return text


def _asked_for(request: dict) -> str:
    gpus = request["gpus"]
    text = f"{gpus} GPU{'s' if gpus != 1 else ''}" if gpus else "no GPU"
    if gpus and request.get("gpu_memory_gb"):
        text += f" with ≥ {request['gpu_memory_gb']:g} GB"
    if gpus and request.get("gpu_capability"):
        text += f", capability ≥ {request['gpu_capability']:g}"
    text += f", {request['cpus']} CPU{'s' if request['cpus'] != 1 else ''}"
    text += f", {request['memory_mb'] / 1024:g} GB memory"
    if request.get("max_runtime_s"):
        text += f", at most {request['max_runtime_s'] // 60} min"
    return text


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


STATE_STYLES = {"completed": "green", "failed": "red", "held": "yellow", "running": "cyan",
                "removed": "dim"}  # fmt: skip


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
        _print_json(page["results"])
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("ID", "NAME", "STATE", "GPUS", "WORKSTATION", "SUBMITTED"):
        table.add_column(column)
    for job in page["results"]:
        table.add_row(
            job["id"][:8], job["name"],
            Text(job["state"], style=STATE_STYLES.get(job["state"], "")),
            _gpus(job["request"]), job["workstation"] or "", _when(job["created_at"]),
        )  # fmt: skip
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
    job = _resolve(obj.client, job_id)
    if as_json:
        _print_json(job)
        return
    rows = [
        ("Job", f"{job['name']} ({job['id']})"),
        ("State", _describe_state(job)),
        ("Detail", job["status_detail"]),
        ("Asked for", _asked_for(job["request"])),
        ("Workstation", " ".join(filter(None, [job["workstation"], job["gpu_model"]]))),
        ("HTCondor id", job["condor_id"]),
        ("Submitted", _when(job["created_at"])),
        ("Started", _when(job["started_at"])),
        ("Finished", _when(job["finished_at"])),
        ("Exit code", "" if job["exit_code"] is None else str(job["exit_code"])),
        ("Web page", job["links"]["web"]),
    ]  # fmt: skip
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
    job = _resolve(obj.client, job_id)
    if follow:
        job = _follow_log(obj.client, job, stream)
        sys.exit(_exit_status(job) if job["is_final"] or job["state"] == "held" else 0)
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
    job = _resolve(obj.client, job_id)
    target = target or Path(f"{_slug(job['name']) or 'job'}-{job['id'][:8]}")
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
    out.print(f"Saved {len(files)} file(s), {_size(total)}, in {target}/")


def _save(client: Client, path: str, destination: Path, label: str) -> None:
    """Download to a temporary name, then rename: a broken transfer leaves no half file."""
    partial = destination.with_name(destination.name + ".part")
    with ExitStack() as stack:
        for total, chunks in client.stream(path):
            progress = None
            if err.is_terminal and (total or 0) > 1024 * 1024:
                progress = stack.enter_context(_transfer_progress())
                task = progress.add_task(label, total=total)
            with partial.open("wb") as sink:
                for chunk in chunks:
                    sink.write(chunk)
                    if progress is not None:
                        progress.advance(task, len(chunk))
    partial.replace(destination)


def _size(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count} B"


def _action(name: str, summary: str, done: str):
    @cli.command(name, help=summary)
    @click.argument("job_id")
    @pass_context
    def command(obj: Context, job_id: str) -> None:
        job = _resolve(obj.client, job_id)
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
    job = _resolve(obj.client, job_id)
    new = obj.client.post(f"/jobs/{job['id']}/rerun/")
    if as_json:
        _print_json(new)
    else:
        out.print(f"Submitted “{new['name']}” as {new['id']}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def pool(obj: Context, as_json: bool) -> None:
    """The pool's workstations and GPUs, and the software environments offered."""
    overview = obj.client.get("/pool/")
    if as_json:
        _print_json(overview)
        return
    if overview["error"]:
        err.print(Text.assemble(("The pool did not answer: ", "yellow"), overview["error"]))
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("WORKSTATION", "STATUS", "GPUS FREE", "GPU", "GPU MEMORY", "CPUS FREE"):
        table.add_column(column)
    for station in overview["workstations"]:
        gpu = station["gpu"] or {}
        table.add_row(
            station["name"], station["status_label"],
            f"{station['free_gpus']}/{station['total_gpus']}" if station["total_gpus"] else "-",
            gpu.get("name", "-"),
            f"{gpu['memory_mb'] / 1024:.0f} GB" if gpu else "-",
            f"{station['free_cpus']}/{station['total_cpus']}",
        )  # fmt: skip
    out.print(table)
    out.print(f"{overview['free_gpus']} of {overview['total_gpus']} GPUs free; "
              f"{overview['nightshift_gpus']} running Nightshift jobs.")  # fmt: skip
    environments = ", ".join(
        e["name"] + (" (default)" if e["is_default"] else "") for e in overview["environments"]
    )
    out.print(f"Software environments: {environments or 'none'}")


REPORT_TABLES = ("usage", "over_time", "outcomes", "waits", "losses", "utilization_hour",
                 "utilization_weekday")  # fmt: skip


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
def report(obj: Context, period: str | None, month: str | None, start: str | None,
           end: str | None, group: str, lab: str | None, table: str, csv_to: Path | None,
           as_json: bool) -> None:  # fmt: skip
    """Usage of your labs: GPU-hours, outcomes, waits, losses (lab leads and admins)."""
    period = period or ("month" if month else "custom" if start or end else "30d")
    params = {"period": period, "month": month, "start": start, "end": end, "group": group,
              "lab": lab}  # fmt: skip
    params = {key: value for key, value in params.items() if value is not None}
    if csv_to is not None:
        _save(obj.client, f"/reports/{table}.csv?{urlencode(params)}", csv_to, table)
        out.print(f"Saved the {table} table to {csv_to}")
        return
    if table == "records":
        raise click.UsageError("Every run of the period is a CSV: add --csv FILE.")
    body = obj.client.get("/reports/", **params)
    if as_json:
        _print_json(body)
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
    grid = Table(box=None, header_style="bold", pad_edge=False, title=chosen["title"],
                 title_justify="left")  # fmt: skip
    for column in chosen["columns"]:
        grid.add_column(column["heading"].upper())
    for row in chosen["rows"]:
        grid.add_row(*("-" if row.get(c["key"]) is None else str(row[c["key"]])
                       for c in chosen["columns"]))  # fmt: skip
    out.print(grid)


def main() -> None:  # pragma: no cover - the console script's entry point
    cli()
