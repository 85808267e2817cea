"""nightshift env: software environments (list, show, create, add a version, build, delete)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import click

from .common import EPILOG, Context, err, new_table, out, pass_context, print_json, wait_until_final


def _path(name: str, *rest: str) -> str:
    return "/environments/" + "/".join([quote(name, safe=""), *rest]) + "/"


def _split(reference: str) -> tuple[str, int | None]:
    name, _, number = reference.partition("@")
    if number and not number.isdigit():
        raise click.BadParameter(f"{number!r} is not a version number (NAME@3).")
    return name, int(number) if number else None


def _version_fields(requirements: Path | None, python: str | None, image: str | None) -> dict:
    fields: dict = {}
    if requirements is not None:
        fields["requirements"] = requirements.read_text(encoding="utf-8-sig")
    if python:
        fields["python_version"] = python
    if image:
        fields["container_image"] = image
    if not fields.get("requirements") and not image:
        raise click.UsageError("Give -r requirements.txt, or --image for a container.")
    return fields


_version_options = [
    click.option(
        "-r",
        "--requirements",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="A requirements.txt: the packages, one per line.",
    ),
    click.option("--python", metavar="3.X", help="Its Python version (default: the site's)."),
    click.option("--image", metavar="IMAGE", help="Instead of packages: a container image."),
]


def version_options(command):
    for option in reversed(_version_options):
        command = option(command)
    return command


@click.group(epilog=EPILOG)
def env() -> None:
    """Software environments: packages locked once, installed once per workstation."""


@env.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def env_list(obj: Context, as_json: bool) -> None:
    """The environments you may use: yours, your labs' and the site's."""
    environments = obj.client.get("/environments/", page_size=200)["results"]
    if as_json:
        print_json(environments)
        return
    table = new_table("NAME", "LATEST", "FOR", "KIND", "DESCRIPTION")
    for e in environments:
        table.add_row(
            e["name"] + (" (default)" if e["is_default"] else ""),
            e["latest"] or "-",
            e["visibility"] + (f" ({e['lab']})" if e["lab"] else ""),
            e["kind"],
            e["description"] or "",
        )
    out.print(table)


@env.command("show")
@click.argument("reference", metavar="NAME[@VERSION]")
@click.option("--lock", "lock_only", is_flag=True, help="Print only the lock (exact pins).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def env_show(obj: Context, reference: str, lock_only: bool, as_json: bool) -> None:
    """An environment's versions and locked packages (the latest, or NAME@VERSION)."""
    name, number = _split(reference)
    environment = obj.client.get(_path(name))
    versions = environment["versions"]
    chosen = [v for v in versions if number is None or v["number"] == number][:1]
    if not chosen:
        raise click.ClickException(f"{name} has no version {number}.")
    version = chosen[0]
    if as_json:
        print_json(environment)
        return
    if lock_only:
        click.echo(version["lock"], nl=False)
        return
    out.print(
        f"{environment['name']} ({environment['visibility']}): "
        f"{environment['description'] or 'no description'}"
    )
    out.print(
        f"Versions: {', '.join(str(v['number']) for v in versions)}; showing {version['reference']}"
    )
    if version["container_image"]:
        out.print(f"Container image: {version['container_image']}")
        return
    out.print(f"Python {version['python_version']}; {len(version['packages'])} packages locked:")
    for package in version["packages"]:
        out.print(f"  {package['name']}=={package['version']}")


@env.command("create", epilog=EPILOG)
@click.argument("name")
@version_options
@click.option("--description", default="", help="What it is for, in a sentence.")
@click.option(
    "--share",
    type=click.Choice(["private", "lab", "site"]),
    default="private",
    show_default=True,
    help="Who may use it (site: administrators only).",
)
@click.option("--lab", help="With --share lab: the lab to share it with.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def env_create(
    obj: Context,
    name: str,
    requirements: Path | None,
    python: str | None,
    image: str | None,
    description: str,
    share: str,
    lab: str | None,
    as_json: bool,
) -> None:
    """Make an environment; its requirements are resolved now into a lock."""
    fields = _version_fields(requirements, python, image)
    fields.update(name=name, description=description, visibility=share, lab=lab or "")
    environment = obj.client.post("/environments/", json=fields)
    if as_json:
        print_json(environment)
        return
    version = environment["versions"][0]
    out.print(
        f"Created {version['reference']}: {_summary(version)}. "
        f"Use it with: nightshift submit --environment {name} train.py"
    )


@env.command("add-version")
@click.argument("name")
@version_options
@pass_context
def env_add_version(
    obj: Context, name: str, requirements: Path | None, python: str | None, image: str | None
) -> None:
    """Lock a new version of an environment you own (versions never change)."""
    version = obj.client.post(
        _path(name, "versions"), json=_version_fields(requirements, python, image)
    )
    out.print(f"Locked {version['reference']}: {_summary(version)}.")


def _summary(version: dict) -> str:
    if version["container_image"]:
        return f"container {version['container_image']}"
    return f"{len(version['packages'])} packages for Python {version['python_version']}"


@env.command("build")
@click.argument("reference", metavar="NAME[@VERSION]")
@click.option("--wait", is_flag=True, help="Wait for the build; exit 1 when it fails.")
@pass_context
def env_build(obj: Context, reference: str, wait: bool) -> None:
    """Test-build a version on a workstation: install it and import each package."""
    name, number = _split(reference)
    if number is None:
        number = obj.client.get(_path(name))["versions"][0]["number"]
    path = _path(name, "versions", str(number), "build")
    report = obj.client.post(path)
    out.print(
        f"Test build of {name}@{number} submitted as job {report['job']} "
        f"(follow it with: nightshift logs {report['job']} --stream install -f)"
    )
    if not wait:
        return
    wait_until_final(obj.client, obj.client.get(f"/jobs/{report['job']}/"))
    report = obj.client.get(path)
    if report["state"] == "passed":
        out.print(f"{name}@{number} builds and imports.")
        return
    err.print(f"The test build of {name}@{number} failed: {report['explanation']}")
    raise SystemExit(1)


@env.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask.")
@pass_context
def env_delete(obj: Context, name: str, yes: bool) -> None:
    """Delete an environment you own; jobs that used it keep its lock."""
    if not yes:
        click.confirm(f"Delete {name}?", abort=True)
    obj.client.delete(_path(name))
    out.print(f"Deleted {name}.")
