"""nightshift model: published models (list, show, pull, publish)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import click

from .common import EPILOG, Context, new_table, out, pass_context, print_json
from .data_commands import pull_archive

REFERENCE = re.compile(
    r"(?P<lab>[A-Za-z0-9_]{1,63})/(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,79})"
    r"(?:@(?P<number>[0-9]{1,9}))?"
)


def _split(reference: str) -> tuple[str, str, int | None]:
    match = REFERENCE.fullmatch(reference.strip())
    if match is None:
        raise click.BadParameter(
            f"{reference!r} is not a model: give LAB/NAME or LAB/NAME@VERSION, as "
            "`nightshift model list` shows it."
        )
    return match["lab"], match["name"], int(match["number"]) if match["number"] else None


def _path(lab: str, name: str, number: int | None = None) -> str:
    path = f"/models/{quote(lab, safe='')}/{quote(name, safe='')}/"
    return path if number is None else f"{path}versions/{number}/"


@click.group(epilog=EPILOG)
def model() -> None:
    """Published models: a finished job's outputs, shared with your lab or everyone."""


@model.command("list")
@click.option("--search", "query", metavar="WORDS", help="Words in the name or the card.")
@click.option("--lab", metavar="LAB", help="One lab's, as references name it.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def model_list(obj: Context, query: str | None, lab: str | None, as_json: bool) -> None:
    """The models you may use, each by its newest version you may see."""
    params = {"page_size": 200, **({"q": query} if query else {}), **({"lab": lab} if lab else {})}
    versions = obj.client.get("/models/", **params)["results"]
    if as_json:
        print_json(versions)
        return
    table = new_table("REFERENCE", "FOR", "FILES", "PUBLISHED BY", "METRICS")
    for version in versions:
        final = version["metrics"].get("final") or {}
        metrics = ", ".join(f"{name}={value:.4g}" for name, value in list(final.items())[:3])
        table.add_row(
            version["reference"],
            version["visibility"],
            str(version["file_count"]),
            version["published_by"] or "-",
            metrics or "-",
        )
    out.print(table)


@model.command("show")
@click.argument("reference", metavar="LAB/NAME[@VERSION]")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def model_show(obj: Context, reference: str, as_json: bool) -> None:
    """A version's card, files, metrics and lineage (the newest, or @VERSION)."""
    version = obj.client.get(_path(*_split(reference)))
    if as_json:
        print_json(version)
        return
    out.print(
        f"{version['reference']} ({version['visibility']}), published by "
        f"{version['published_by'] or '-'} on {version['created_at'][:10]}"
    )
    out.print(f"{version['file_count']} files, sha256 {version['sha256']}")
    for file in version["files"][:20]:
        out.print(f"  {file['path']}  {file['size']:,} bytes")
    for name, best in (version["metrics"].get("best") or {}).items():
        final = version["metrics"]["final"].get(name)
        out.print(f"  {name}: final {final:.6g}, best {best['value']:.6g} at step {best['step']}")
    job = version["lineage"].get("job") or {}
    out.print(f"From job {job.get('name')} ({job.get('id')}) by {job.get('owner')}")
    if version["card"]:
        out.print()
        out.print(version["card"], markup=False, highlight=False)


@model.command("pull")
@click.argument("reference", metavar="LAB/NAME[@VERSION]")
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    help="The folder to unpack into (default: ./NAME).",
)
@pass_context
def model_pull(obj: Context, reference: str, output: Path | None) -> None:
    """Download a version and unpack it, after checking its SHA-256."""
    lab, name, number = _split(reference)
    version = obj.client.get(_path(lab, name, number))
    path = _path(lab, name, version["number"]) + "archive.tar"
    pull_archive(obj, path, version, output or Path(name))


@model.command("serve")
@click.argument("reference", metavar="LAB/NAME@VERSION")
@click.option(
    "--template",
    default="",
    metavar="TEMPLATE",
    help="LAB/NAME[@VERSION] of a template with a serve command (default: the one "
    "that made the model, else the first that can serve it).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@pass_context
def model_serve(obj: Context, reference: str, template: str, as_json: bool) -> None:
    """Serve a model version as a live session, with a template's serve command."""
    lab, name, number = _split(reference)
    if number is None:
        number = obj.client.get(_path(lab, name))["number"]
    job = obj.client.post(_path(lab, name, number) + "serve/", {"template": template})
    if as_json:
        print_json(job)
        return
    out.print(
        f"Serving {lab}/{name}@{number} as job {job['id']} ({job['links']['web']}); "
        "once it runs, its page opens the endpoint."
    )


@model.command("publish")
@click.argument("job_id", metavar="JOB")
@click.option("--name", required=True, help="The model's name in its lab.")
@click.option(
    "--file",
    "files",
    multiple=True,
    required=True,
    metavar="PATH",
    help="An output file of the job (outputs/model.pt); repeat for more.",
)
@click.option(
    "--card",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A Markdown file: what it is, how it was trained, how to use it.",
)
@click.option(
    "--share",
    "visibility",
    type=click.Choice(["private", "lab", "site"]),
    default="lab",
    show_default=True,
    help="Who may see and use it.",
)
@click.option("--lab", help="The lab to publish in (default: the job's).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def model_publish(
    obj: Context,
    job_id: str,
    name: str,
    files: tuple[str, ...],
    card: Path | None,
    visibility: str,
    lab: str | None,
    as_json: bool,
) -> None:
    """Publish a finished job's output files as a new version of a model."""
    body = {
        "job": job_id,
        "name": name,
        "files": list(files),
        "visibility": visibility,
        "card": card.read_text(encoding="utf-8") if card else "",
    }
    if lab:
        body["lab"] = lab
    version = obj.client.post("/models/", body)
    if as_json:
        print_json(version)
        return
    out.print(
        f"Published {version['reference']}: {version['file_count']} files, sha256 "
        f"{version['sha256']}."
    )
