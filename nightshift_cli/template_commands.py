"""nightshift template (list, show, publish) and nightshift run TEMPLATE --param k=v."""

from __future__ import annotations

import json
import re
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click

from .common import (
    EPILOG,
    Context,
    archive_folder,
    counted,
    new_table,
    out,
    pass_context,
    print_json,
    progress_file,
    report_submitted,
)

REFERENCE = re.compile(
    r"(?:(?P<lab>[A-Za-z0-9_]{1,63})/)?"
    r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,79})(?:@(?P<number>[0-9]{1,9}))?"
)


def template_path(obj: Context, reference: str) -> str:
    """The API path of LAB/NAME[@VERSION], or of NAME[@VERSION] when one template you may
    see has that name."""
    match = REFERENCE.fullmatch(reference.strip())
    if match is None:
        raise click.BadParameter(
            f"{reference!r} is not a template: give LAB/NAME[@VERSION], "
            "as `nightshift template list` shows it."
        )
    lab, name = match["lab"], match["name"]
    if lab is None:
        found = {
            v["reference"].split("@")[0]
            for v in obj.client.get("/templates/", q=name, page_size=200)["results"]
            if v["name"] == name
        }
        if len(found) != 1:
            raise click.BadParameter(
                f"{'No' if not found else 'More than one'} template called {name!r} that you "
                f"may run{': ' + ', '.join(sorted(found)) if found else ''}; give LAB/{name}."
            )
        lab = found.pop().split("/")[0]
    path = f"/templates/{quote(lab, safe='')}/{quote(name, safe='')}/"
    return path if match["number"] is None else f"{path}versions/{match['number']}/"


@click.group(epilog=EPILOG)
def template() -> None:
    """Job templates: a lab's working training setups, run with a few parameters."""


@template.command("list")
@click.option("--search", "query", metavar="WORDS", help="Words in the name, title or card.")
@click.option("--lab", metavar="LAB", help="One lab's, as references name it.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def template_list(obj: Context, query: str | None, lab: str | None, as_json: bool) -> None:
    """The templates you may run, each by its newest version you may see."""
    params = {"page_size": 200, **({"q": query} if query else {}), **({"lab": lab} if lab else {})}
    versions = obj.client.get("/templates/", **params)["results"]
    if as_json:
        print_json(versions)
        return
    table = new_table("REFERENCE", "TITLE", "FOR", "PARAMETERS")
    for version in versions:
        names = ", ".join(parameter["name"] for parameter in version["parameters"])
        table.add_row(version["reference"], version["title"], version["visibility"], names or "-")
    out.print(table)


def _describe(parameter: dict) -> str:
    kind = parameter["type"]
    if parameter["choices"]:
        kind += f" ({' | '.join(parameter['choices'])})"
    elif parameter["min"] is not None or parameter["max"] is not None:
        low = "" if parameter["min"] is None else f"{parameter['min']:g}"
        high = "" if parameter["max"] is None else f"{parameter['max']:g}"
        kind += f" {low}..{high}"
    default = "" if parameter["default"] is None else f", default {parameter['default']}"
    needed = "" if parameter["default"] is not None or not parameter["required"] else ", needed"
    return f"{parameter['name']}: {kind}{default}{needed}"


@template.command("show")
@click.argument("reference", metavar="TEMPLATE")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def template_show(obj: Context, reference: str, as_json: bool) -> None:
    """A template's parameters, resources and card (the newest version, or @VERSION)."""
    version = obj.client.get(template_path(obj, reference))
    if as_json:
        print_json(version)
        return
    out.print(
        f"{version['reference']}: {version['title']} ({version['visibility']}), "
        f"run {version['runs']} times",
        markup=False,
        highlight=False,
    )
    for parameter in version["parameters"]:
        out.print(f"  --param {_describe(parameter)}", markup=False, highlight=False)
        if parameter["help"]:
            out.print(f"      {parameter['help']}", markup=False, highlight=False)
    resources = version["resources"]
    out.print(
        f"Runs {version['entry_command']} with {counted(resources['gpus'], 'GPU')}, "
        f"{counted(resources['cpus'], 'CPU')}",
        markup=False,
        highlight=False,
    )
    if version["serve_command"]:
        out.print(f"Serves models with {version['serve_command']}", markup=False, highlight=False)
    if version["card"]:
        out.print()
        out.print(version["card"], markup=False, highlight=False)


def parse_params(params: tuple[str, ...]) -> dict[str, str]:
    values: dict[str, str] = {}
    for item in params:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(
                f"{item!r}: write NAME=VALUE, e.g. epochs=3.", param_hint="--param"
            )
        if name.strip() in values:
            raise click.BadParameter(f"{name.strip()} is given twice.", param_hint="--param")
        values[name.strip()] = value
    return values


@click.command("run", epilog=EPILOG)
@click.argument("reference", metavar="TEMPLATE")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A parameter's value; repeat for more. Left out: its default.",
)
@click.option("--name", default="", help="The job's name (default: the template's title).")
@click.option("--lab", default="", help="The lab to charge, by name (default: your first).")
@click.option("--wait", is_flag=True, help="Wait until the job ends; exit with its status.")
@click.option("--follow", is_flag=True, help="Stream its output until it ends (implies --wait).")
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@pass_context
def run(
    obj: Context,
    reference: str,
    params: tuple[str, ...],
    name: str,
    lab: str,
    wait: bool,
    follow: bool,
    as_json: bool,
) -> None:
    """Run a job template with your parameter values.

    \b
    nightshift run vision/finetune --param epochs=3 --param dataset=reviews
    nightshift template show vision/finetune     (what it takes)
    """
    values = parse_params(params)
    job = obj.client.post(
        template_path(obj, reference) + "runs/", {"parameters": values, "name": name, "lab": lab}
    )
    report_submitted(obj, job, wait=wait, follow=follow, as_json=as_json)


@template.command("publish")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--lab", required=True, help="The lab, by name; you lead it.")
@click.option("--name", required=True, help="The template's name in its lab.")
@click.option("--title", required=True, help="What students see.")
@click.option("--entry", "entry_command", required=True, help="How it starts: python train.py")
@click.option("--serve", "serve_command", default="", help="How it serves a model it made.")
@click.option("--environment", "software", default="", help="NAME@VERSION of the environment.")
@click.option("--dataset", "datasets", multiple=True, help="A dataset every run gets.")
@click.option("--model", "models", multiple=True, help="A model every run gets (LAB/NAME@N).")
@click.option("--gpus", type=click.IntRange(0), default=0, show_default=True)
@click.option("--gpu-memory", type=float, help="At least this many GB per GPU.")
@click.option("--cpus", type=click.IntRange(1), default=1, show_default=True)
@click.option("--memory-mb", type=click.IntRange(1), default=2048, show_default=True)
@click.option("--max-runtime", "max_runtime_s", type=click.IntRange(1), help="Seconds.")
@click.option(
    "--parameters",
    "parameters_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A JSON file: the parameter form (docs/job-templates.md).",
)
@click.option(
    "--card",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A Markdown file: what it does, what data it wants.",
)
@click.option(
    "--share",
    "visibility",
    type=click.Choice(["private", "lab", "site"]),
    default="lab",
    show_default=True,
    help="Who may see and run it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def template_publish(
    obj: Context,
    path: Path,
    parameters_file: Path | None,
    card: Path | None,
    datasets: tuple[str, ...],
    models: tuple[str, ...],
    as_json: bool,
    gpus: int,
    gpu_memory: float | None,
    cpus: int,
    memory_mb: int,
    max_runtime_s: int | None,
    **fields: Any,
) -> None:
    """Publish a script, archive or project folder as a new template version (lab leads)."""
    data: dict[str, Any] = {
        **fields,
        "datasets": list(datasets),
        "models": list(models),
        "card": card.read_text(encoding="utf-8") if card else "",
        "parameters": parameters_file.read_text(encoding="utf-8") if parameters_file else "[]",
        "resources": json.dumps(
            {
                "gpus": gpus,
                "gpu_memory_gb": gpu_memory,
                "cpus": cpus,
                "memory_mb": memory_mb,
                "max_runtime_s": max_runtime_s,
            }
        ),
    }
    with ExitStack() as stack:
        upload = archive_folder(path, stack) if path.is_dir() else path
        files = {"project": progress_file(upload, stack, label=f"Uploading {path.name}")}
        version = obj.client.upload("/templates/", data, files)
    if as_json:
        print_json(version)
        return
    count = len(version["parameters"])
    out.print(
        f"Published {version['reference']}: {version['title']}, {count} parameters.",
        markup=False,
        highlight=False,
    )
