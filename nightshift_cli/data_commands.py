"""nightshift data: datasets (push, pull, list, show, rm)."""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import quote

import click

from . import config
from .common import (
    EPILOG,
    SKIPPED_DIRS,
    Context,
    err,
    new_table,
    out,
    pass_context,
    print_json,
    transfer_progress,
)

POLL_S = 1.0


def _path(name: str, *rest: str) -> str:
    return "/datasets/" + "/".join([quote(name, safe=""), *rest]) + "/"


def _split(reference: str) -> tuple[str, int | None]:
    name, _, number = reference.partition("@")
    if number and not number.isdigit():
        raise click.BadParameter(f"{number!r} is not a version number (NAME@3).")
    return name, int(number) if number else None


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TB"


@click.group(epilog=EPILOG)
def data() -> None:
    """Datasets: uploaded or registered once, used by name in any job."""


@data.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def data_list(obj: Context, as_json: bool) -> None:
    """The datasets you may use: yours, your labs' and the site's."""
    datasets = obj.client.get("/datasets/", page_size=200)["results"]
    if as_json:
        print_json(datasets)
        return
    table = new_table("NAME", "LATEST", "FILES", "SIZE", "FOR", "OWNER", "DESCRIPTION")
    for d in datasets:
        latest = d["latest_version"] or {}
        table.add_row(
            d["name"],
            latest.get("reference", "-"),
            str(latest.get("file_count", "-")),
            _size(latest["size_bytes"]) if latest else "-",
            d["visibility"] + (f" ({d['lab']})" if d["lab"] else ""),
            d["owner"],
            d["description"] or "",
        )
    out.print(table)


@data.command("show")
@click.argument("reference", metavar="NAME[@VERSION]")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def data_show(obj: Context, reference: str, as_json: bool) -> None:
    """A dataset's versions, and the files and first rows of one (the latest, or @VERSION)."""
    name, number = _split(reference)
    dataset = obj.client.get(_path(name))
    version = _version(dataset, number)
    if as_json:
        print_json(dataset)
        return
    out.print(
        f"{dataset['name']} ({dataset['visibility']}, {dataset['owner']}): "
        f"{dataset['description'] or 'no description'}"
    )
    out.print(
        f"Versions: {', '.join(str(v['number']) for v in dataset['versions'])}; showing "
        f"{version['reference']}"
    )
    out.print(
        f"{version['file_count']} files, {_size(version['size_bytes'])}, sha256 {version['sha256']}"
    )
    if version["shared_path"]:
        out.print(f"On the shared file system at {version['shared_path']}")
    preview = version["preview"]
    for file in preview.get("files", [])[:20]:
        out.print(f"  {file['path']}  {_size(file['size'])}")
    more = len(preview.get("files", [])) - 20 + preview.get("more_files", 0)
    if more > 0:
        out.print(f"  … and {more} more")
    for table in preview.get("tables", []):
        out.print(f"{table['path']}, the first rows:")
        for row in table["rows"]:
            out.print("  " + " | ".join(row))


def _version(dataset: dict, number: int | None) -> dict:
    chosen = [v for v in dataset["versions"] if number is None or v["number"] == number][:1]
    if not chosen:
        raise click.ClickException(f"{dataset['name']} has no version {number}.")
    return chosen[0]


@data.command("push", epilog=EPILOG)
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("--name", required=True, help="The dataset's name (one of yours: a new version).")
@click.option("--description", default="", help="What is in it, in a sentence.")
@click.option(
    "--share",
    type=click.Choice(["private", "lab", "site"]),
    default="private",
    show_default=True,
    help="Who may use it (site: administrators only).",
)
@click.option("--lab", help="With --share lab: the lab to share it with.")
@click.option("--no-wait", is_flag=True, help="Return once uploaded, before it is checked.")
@pass_context
def data_push(
    obj: Context,
    source: Path,
    name: str,
    description: str,
    share: str,
    lab: str | None,
    no_wait: bool,
) -> None:
    """Upload a folder (archived on the way), an archive or a file as a dataset.

    The upload is resumable: if the connection drops, it continues where it stopped, and
    running the same push again later continues the same upload.
    """
    metadata = {"name": name, "description": description, "visibility": share, "lab": lab or ""}
    with ExitStack() as stack:
        if source.is_dir():
            upload, metadata["filename"] = _folder_tar(source), f"{source.resolve().name}.tar"
        else:
            upload, metadata["filename"] = source, source.name
        upload_id = resumable_upload(obj, upload, metadata, label=f"Uploading {source.name}")
        if source.is_dir():
            stack.callback(upload.unlink, missing_ok=True)
    started = obj.client.get(f"/dataset-uploads/{upload_id}/")
    out.print(f"Uploaded; checking and checksumming it (import {started['dataset_import']}).")
    if no_wait:
        return
    done = _wait(obj, {"id": started["dataset_import"], "state": "waiting"})
    if done["state"] == "failed":
        err.print(f"The import failed: {done['message']}")
        raise SystemExit(1)
    out.print(f"{done['version']}: {done['message']}")


CHUNK_BYTES = 8 * 2**20


def _pushes_dir() -> Path:
    """Where pushes keep what resuming needs: a folder's archive, and each upload's address."""
    folder = config.config_path().parent / "pushes"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


def _folder_tar(folder: Path) -> Path:
    """The folder as an uncompressed tar, built the same way each time from the same files,
    so that a push run again resumes the same upload. Kept until the upload completes."""
    key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
    target = _pushes_dir() / f"{key}.tar"
    partial = target.with_suffix(".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as archive:
        for item in sorted(folder.rglob("*")):
            if any(part in SKIPPED_DIRS for part in item.relative_to(folder).parts):
                continue
            if item.is_file() and not item.is_symlink():
                info = archive.gettarinfo(item, arcname=str(item.relative_to(folder)))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                with open(item, "rb") as stream:
                    archive.addfile(info, stream)
    partial.replace(target)
    return target


def resumable_upload(obj: Context, path: Path, metadata: dict, *, label: str) -> str:
    """Sends `path` with the tus protocol; returns the upload's id. A dropped connection is
    retried from the portal's offset, and an upload of the same file begun before resumes."""
    from tusclient import client as tus
    from tusclient.exceptions import TusCommunicationError, TusUploadFailed
    from tusclient.storage.filestorage import FileStorage

    client = obj.client
    tus_client = tus.TusClient(
        f"{client.server}/api/v1/dataset-uploads/", headers=client.auth_headers()
    )
    resumes = FileStorage(str(_pushes_dir() / "uploads.json"))
    try:
        uploader = tus_client.uploader(
            str(path),
            chunk_size=CHUNK_BYTES,
            metadata=metadata,
            retries=10,
            retry_delay=2,
            store_url=True,
            url_storage=resumes,
        )
        size = uploader.get_file_size()
        if uploader.offset:
            err.print(f"Resuming the upload at {_size(uploader.offset)} of {_size(size)}.")
        with transfer_progress() as progress:
            task = progress.add_task(label, total=size, completed=uploader.offset)
            while uploader.offset < size:
                uploader.upload_chunk()
                progress.update(task, completed=uploader.offset)
    except (TusCommunicationError, TusUploadFailed) as exc:
        raise click.ClickException(f"The upload was refused: {_tus_message(exc)}") from None
    finally:
        resumes.close()
    resumes = FileStorage(str(_pushes_dir() / "uploads.json"))
    resumes.remove_item(uploader.fingerprinter.get_fingerprint(uploader.get_file_stream()))
    resumes.close()
    return uploader.url.rstrip("/").rsplit("/", 1)[-1]


def _tus_message(exc) -> str:
    body = getattr(exc, "response_content", None) or b""
    try:
        error = json.loads(body)["error"]
        fields = error.get("fields") or {}
        return (
            "; ".join(f"{field}: {' '.join(messages)}" for field, messages in fields.items())
            or error["message"]
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
        return text.strip() or str(exc)


def _wait(obj: Context, started: dict) -> dict:
    path = f"/dataset-imports/{started['id']}/"
    current = started
    while current["state"] not in ("done", "failed"):
        time.sleep(POLL_S)
        current = obj.client.get(path)
    return current


@data.command("pull")
@click.argument("reference", metavar="NAME[@VERSION]")
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    help="The folder to unpack into (default: ./NAME).",
)
@pass_context
def data_pull(obj: Context, reference: str, output: Path | None) -> None:
    """Download a version and unpack it, after checking its SHA-256."""
    name, number = _split(reference)
    version = _version(obj.client.get(_path(name)), number)
    path = _path(name, "versions", str(version["number"]), "archive.tar").rstrip("/")
    pull_archive(obj, path, version, output or Path(name))


def pull_archive(obj: Context, path: str, version: dict, target: Path) -> None:
    """Download the archive at `path` (a dataset's or a model's version), check it against
    the version's SHA-256, and unpack it into `target`, which must be empty or missing.
    Nothing is unpacked from a download that does not match, nor anything outside `target`
    (tarfile's data filter)."""
    if target.exists() and any(target.iterdir()):
        raise click.ClickException(f"{target} exists and is not empty.")
    with tempfile.TemporaryDirectory(prefix="nightshift-") as temporary:
        archive = Path(temporary) / "download.tar"
        digest = hashlib.sha256()
        with open(archive, "wb") as sink, transfer_progress() as progress:
            for total, chunks in obj.client.stream(path):
                task = progress.add_task(f"Downloading {version['reference']}", total=total)
                for chunk in chunks:
                    digest.update(chunk)
                    sink.write(chunk)
                    progress.advance(task, len(chunk))
        if digest.hexdigest() != version["sha256"]:
            raise click.ClickException(
                f"The download's SHA-256 is {digest.hexdigest()}, not "
                f"{version['sha256']}: nothing was unpacked."
            )
        partial = Path(temporary) / "unpacked"
        with tarfile.open(archive) as tar:
            tar.extractall(partial, filter="data")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.rmdir()
        shutil.move(str(partial), target)
    out.print(
        f"{version['reference']}: {version['file_count']} files in {target}/ (sha256 checked)."
    )


@data.command("rm")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask.")
@pass_context
def data_rm(obj: Context, name: str, yes: bool) -> None:
    """Delete a dataset you own, with all its versions."""
    if not yes:
        click.confirm(f"Delete {name} and all its versions?", abort=True)
    obj.client.delete(_path(name))
    out.print(f"Deleted {name}.")
