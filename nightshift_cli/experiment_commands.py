"""Commands for experiments: sweeps, evaluation matrices and hyperparameter studies."""

from __future__ import annotations

import csv
import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import click

from .common import (
    ARCHIVE_SUFFIXES,
    EPILOG,
    Context,
    archive_folder,
    default_entry,
    err,
    job_options,
    new_table,
    out,
    pass_context,
    print_json,
    request_fields,
    upload_file,
)


def matrix_job_options(command):
    return job_options(command, attach_datasets=False)


@click.command(epilog=EPILOG)
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
@click.option(
    "--random",
    "random_",
    multiple=True,
    metavar="NAME=KIND:LOW:HIGH",
    help="A parameter drawn at random: uniform, log_uniform or int_uniform with "
    "its range, or NAME=choice:a|b|c. Repeat for more; with --count.",
)
@click.option("--count", type=int, help="How many random samples to run.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the samples.")
@click.option("--json", "as_json", is_flag=True, help="Print the sweep as JSON.")
@pass_context
def sweep(
    obj: Context,
    path: Path,
    name: str | None,
    requirements: Path | None,
    grid: tuple[str, ...],
    rows: Path | None,
    random_: tuple[str, ...],
    count: int | None,
    seed: int,
    as_json: bool,
    **fields: Any,
) -> None:
    """Submit many runs of one script, one per parameter set, as one sweep.

    Write {name} in --arg, --env or --entry where a parameter's value goes.

    \b
    nightshift sweep train.py --arg=--lr={lr} --grid lr=0.1,0.01,0.001 --grid batch=32,64
    nightshift sweep train.py --arg=--lr={lr} --random lr=log_uniform:1e-5:0.1 --count 20
    nightshift sweep ./project --entry "python eval.py {system} {data}" --rows matrix.csv
    """
    parameters = _sweep_parameters(grid, rows, random_, count, seed)
    data = request_fields(fields) | {"parameters": json.dumps(parameters)}
    created = upload_file(obj, "/sweeps/", path, name, requirements, data)
    if as_json:
        print_json(created)
        return
    # A large sweep's runs are written after it is accepted: it says how many it will have.
    runs = created.get("planned_runs") or created["run_count"]
    err.print(
        f"Submitted sweep “{created['name']}” with {runs:,} runs as "
        f"{created['id']}  ({created['links']['web']})"
    )


@click.command(epilog=EPILOG)
@matrix_job_options
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
    "--system-model",
    multiple=True,
    metavar="NAME=LAB/MODEL@VERSION",
    help="The published model a system is; its runs find it at models/MODEL/ ({model}).",
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
def matrix(
    obj: Context,
    name: str | None,
    requirements: Path | None,
    systems: tuple[str, ...],
    system_entry: tuple[str, ...],
    system_model: tuple[str, ...],
    datasets: tuple[str, ...],
    dataset_path: tuple[str, ...],
    as_json: bool,
    **fields: Any,
) -> None:
    """Evaluate every system on every dataset: an evaluation matrix, as one sweep.

    {dataset} in --arg or a --system-entry becomes the dataset's path (or dataset/, where
    an uploaded one is unpacked), {system} the system's name, and {model} the folder of a
    --system-model's published model.

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
    models = dict(_pair(item, "--system-model") for item in system_model)
    data = request_fields({k: v for k, v in fields.items() if k != "entry_command"})
    data["name"] = name or "evaluation"
    system_list, dataset_list, files = [], [], []
    with ExitStack() as stack:
        names_seen: set[str] = set()

        def add_file(field: str, path: Path, number: int) -> str:
            upload = path
            if path.is_dir():
                upload = archive_folder(path, stack)
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
                entry = default_entry(path) if path.is_dir() else "python train.py"
            entry_record = {
                "name": system,
                "file": add_file("system_files", path, number),
                "entry_command": entry,
            }
            if system in models:
                entry_record["model"] = models.pop(system)
            system_list.append(entry_record)
        if entries:
            raise click.UsageError(f"--system-entry names no system: {', '.join(entries)}.")
        if models:
            raise click.UsageError(f"--system-model names no system: {', '.join(models)}.")
        for number, item in enumerate(datasets):
            dataset, location = _pair(item, "--dataset")
            path = Path(location)
            if not path.is_file():
                raise click.UsageError(f"--dataset {item!r}: {location} is not a file.")
            dataset_list.append({"name": dataset, "file": add_file("dataset_files", path, number)})
        for item in dataset_path:
            dataset, location = _pair(item, "--dataset-path")
            dataset_list.append({"name": dataset, "path": location})
        data["systems"], data["datasets"] = json.dumps(system_list), json.dumps(dataset_list)
        created = obj.client.upload("/sweeps/matrix/", data, files)
    if as_json:
        print_json(created)
        return
    err.print(
        f"Submitted “{created['name']}”: {len(system_list)} systems by "
        f"{len(dataset_list)} datasets, {created['run_count']} runs, as {created['id']}  "
        f"({created['links']['web']})"
    )


@click.command(epilog=EPILOG)
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@job_options
@click.option(
    "--space",
    multiple=True,
    metavar="NAME=KIND:LOW:HIGH",
    help="A hyperparameter to search: uniform, log_uniform or int_uniform with its "
    "range, or NAME=choice:a|b|c. Repeat.",
)
@click.option(
    "--objective", required=True, help="The metric to optimise, as nightshift.log logs it."
)
@click.option("--maximize", is_flag=True, help="Maximise the objective (default: minimise).")
@click.option("--trials", type=int, default=20, show_default=True, help="At most this many.")
@click.option("--parallel", type=int, default=4, show_default=True, help="Trials at once.")
@click.option("--sampler", type=click.Choice(["tpe", "random"]), default="tpe", show_default=True)
@click.option(
    "--pruner", type=click.Choice(["median", "asha", "none"]), default="median", show_default=True
)
@click.option("--gpu-hours", type=float, help="Stop once the trials used this many.")
@click.option("--deadline", type=int, metavar="MINUTES", help="Stop after this long.")
@click.option("--seed", type=int, help="Seed of the sampler.")
@click.option("--json", "as_json", is_flag=True, help="Print the study as JSON.")
@pass_context
def study(
    obj: Context,
    path: Path,
    name: str | None,
    requirements: Path | None,
    space: tuple[str, ...],
    objective: str,
    maximize: bool,
    trials: int,
    parallel: int,
    sampler: str,
    pruner: str,
    gpu_hours: float | None,
    deadline: int | None,
    seed: int | None,
    as_json: bool,
    **fields: Any,
) -> None:
    """Search hyperparameters with Optuna: each trial is a job, PARALLEL at a time.

    Write {name} in --arg or --env where a hyperparameter goes; the script logs the
    objective with nightshift.log() and may stop early when nightshift.should_stop().

    \b
    nightshift study train.py --arg=--lr={lr} --space lr=log_uniform:1e-5:0.1 \\
        --objective val_loss --trials 40 --parallel 4 --gpus 1
    """
    if not space:
        raise click.UsageError("Give at least one --space NAME=KIND:LOW:HIGH.")
    plan = {
        "space": _distributions(space, "--space"),
        "objective": objective,
        "direction": "maximize" if maximize else "minimize",
        "sampler": sampler,
        "pruner": pruner,
        "parallel": parallel,
        "max_trials": trials,
        "gpu_hours": gpu_hours,
        "deadline_minutes": deadline,
        "seed": seed,
    }
    data = request_fields(fields) | {"study": json.dumps(plan)}
    created = upload_file(obj, "/sweeps/study/", path, name, requirements, data)
    if as_json:
        print_json(created)
        return
    err.print(
        f"Started study “{created['name']}” as {created['id']}: up to {trials} trials, "
        f"{parallel} at a time  ({created['links']['web']})"
    )


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
            raise click.UsageError(
                f"{option} {item!r}: write NAME=KIND:LOW:HIGH or NAME=choice:a|b|c."
            )
        if kind == "choice":
            distributions[key] = {
                "kind": "choice",
                "choices": [_value(c) for c in bounds.split("|")],
            }
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


def _sweep_parameters(
    grid: tuple[str, ...], rows: Path | None, random_: tuple[str, ...], count: int | None, seed: int
) -> dict[str, Any]:
    given = [
        kind for kind, value in (("--grid", grid), ("--rows", rows), ("--random", random_)) if value
    ]
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


@click.command()
@click.argument("sweep_id", required=False)
@click.option("--cancel", is_flag=True, help="Cancel every run of the sweep that has not ended.")
@click.option("--results", is_flag=True, help="Compare the runs by a metric they logged.")
@click.option("--metric", help="With --results: the metric (default: the first logged).")
@click.option(
    "--sort",
    default="index",
    show_default=True,
    help="With --results: index, best, final, state, gpu_hours or p.NAME; -X descending.",
)
@click.option(
    "--csv",
    "csv_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --results: save the comparison as CSV.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def sweeps(
    obj: Context,
    sweep_id: str | None,
    cancel: bool,
    results: bool,
    metric: str | None,
    sort: str,
    csv_file: Path | None,
    as_json: bool,
) -> None:
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
            print_json(listed)
            return
        table = new_table("ID", "NAME", "KIND", "RUNS", "CLUSTER")
        for item in listed:
            table.add_row(
                item["id"][:8],
                item["name"],
                item["kind"],
                str(item["run_count"]),
                str(item["cluster_id"] or "-"),
            )
        out.print(table)
        return
    found = obj.client.get(f"/sweeps/{sweep_id}/") if not cancel else found
    if as_json:
        print_json(found)
        return
    names = list(found["runs"][0]["parameters"]) if found["runs"] else []
    states = ", ".join(f"{n} {state}" for state, n in sorted(found["states"].items()))
    out.print(f"{found['name']}: {found['run_count']} runs ({states})")
    table = new_table("#", *names, "STATE", "WORKSTATION", "EXIT")
    for run in found["runs"]:
        exit_code = "" if run["exit_code"] is None else str(run["exit_code"])
        table.add_row(
            str(run["index"]),
            *(str(run["parameters"].get(n, "")) for n in names),
            run["state"],
            run["workstation"] or "-",
            exit_code,
        )
    out.print(table)


def _sweep_results(
    obj: Context, sweep_id: str, metric: str | None, sort: str, csv_file: Path | None, as_json: bool
) -> None:
    if csv_file is not None:
        query = urlencode({"sort": sort, **({"metric": metric} if metric else {})})
        for _, chunks in obj.client.stream(f"/sweeps/{sweep_id}/results.csv?{query}"):
            csv_file.write_bytes(b"".join(chunks))
        err.print(f"Saved the comparison to {csv_file}")
        return
    found = obj.client.get(f"/sweeps/{sweep_id}/results/", metric=metric, sort=sort)
    if as_json:
        print_json(found)
        return
    if found["metric"] is None:
        out.print("No run has logged a metric yet.")
    metric_name = found["metric"] or "metric"
    table = new_table(
        "#", *found["parameters"], "STATE", f"FINAL {metric_name}", f"BEST {metric_name}", "GPU-H"
    )
    best = found["best"]["index"] if found["best"] else None
    for run in found["runs"]:
        mark = " *" if run["index"] == best else ""
        table.add_row(
            f"{run['index']}{mark}",
            *(str(run["parameters"].get(n, "")) for n in found["parameters"]),
            run["state"],
            _number(run["final"]),
            _number(run["best"]),
            f"{run['gpu_hours']:.2f}",
        )
    out.print(table)
    if found["best"]:
        goal = "lowest" if found["goal"] == "min" else "highest"
        out.print(
            f"* best ({goal} {metric_name}): run {best}, "
            + ", ".join(f"{k}={v}" for k, v in found["best"]["parameters"].items())
        )


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
