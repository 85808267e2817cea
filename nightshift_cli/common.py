"""What the commands share: the consoles, exit statuses, the context with its API client,
the job options, uploads with progress, and following a job until it ends."""

from __future__ import annotations

import json
import re
import sys
import tarfile
import tempfile
import time
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

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
from .client import ApiError, Client, ProgressReader

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
SKIPPED_DIRS = {
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    ".venv",
    "venv",
    "node_modules",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
}


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
                    "or set NIGHTSHIFT_TOKEN.",
                    code="not_authenticated",
                )
            self._client = Client(self.settings.server, self.settings.token)
        return self._client


pass_context = click.make_pass_decorator(Context)


def job_options(command, *, attach_datasets: bool = True):
    """The options that describe what to run and on what: `submit` and `sweep` share them
    (`matrix` too, without --dataset, which there names its own rows)."""
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
                "--finish-by",
                metavar="WHEN",
                help="When it should be finished (ISO 8601, e.g. 2026-12-04T17:00+01:00): the "
                "portal says how likely that is, and it goes ahead of your lab's later ones.",
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
                "software_environment",
                metavar="NAME[@VERSION]",
                help="A software environment (`nightshift env list`): its latest version, "
                "or NAME@VERSION.",
            ),
            *(
                [
                    click.option(
                        "--dataset",
                        "datasets",
                        multiple=True,
                        metavar="NAME[@VERSION]",
                        help="A dataset (`nightshift data list`), read-only at datasets/NAME/ "
                        "in the job; repeat for more.",
                    )
                ]
                if attach_datasets
                else []
            ),
            click.option(
                "--model",
                "models",
                multiple=True,
                metavar="LAB/NAME[@VERSION]",
                help="A published model (`nightshift model list`), read-only at models/NAME/ "
                "in the job, to fine-tune or evaluate; repeat for more.",
            ),
            click.option(
                "--live",
                "live_services",
                multiple=True,
                type=click.Choice(["tensorboard", "serve"]),
                help="Open it while it runs, through the portal: tensorboard (on "
                "nightshift.tensorboard_dir()) or serve (its HTTP endpoint on "
                "nightshift.serve_socket()); repeat for both.",
            ),
            click.option(
                "--lab", help="The lab to charge, when you are in several (see `whoami`)."
            ),
        ]
    ):
        command = option(command)
    return command


def upload_file(
    obj: Context,
    endpoint: str,
    path: Path,
    name: str | None,
    requirements: Path | None,
    data: dict[str, Any],
) -> Any:
    """POST a script, archive or folder (archived on the way) with the request's fields."""
    data["name"] = name or path.resolve().name
    with ExitStack() as stack:
        upload = path
        if path.is_dir():
            data.setdefault("entry_command", default_entry(path))
            upload = archive_folder(path, stack)
        elif path.name.lower().endswith(ARCHIVE_SUFFIXES):
            data.setdefault("entry_command", "python train.py")
        files = {"script": progress_file(upload, stack, label=f"Uploading {path.name}")}
        if requirements is not None:
            files["requirements"] = (
                requirements.name,
                stack.enter_context(requirements.open("rb")),
            )
        return obj.client.upload(endpoint, data, files)


def request_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The API's multipart fields for the options given; lists repeat their field."""
    names = {
        "gpu_memory": "gpu_memory_gb",
        "gpu_capability": "gpu_capability",
        "memory": "memory_gb",
        "max_runtime": "max_runtime_minutes",
    }
    data: dict[str, Any] = {}
    for option, value in fields.items():
        if value is None or value == () or value is False:
            continue
        key = names.get(option, option)
        data[key] = (
            list(value) if isinstance(value, tuple) else ("true" if value is True else str(value))
        )
    return data


def default_entry(folder: Path) -> str:
    for candidate in ("train.py", "main.py"):
        if (folder / candidate).is_file():
            return f"python {candidate}"
    raise click.UsageError(
        f"{folder} has no train.py or main.py; say how to start it, e.g. "
        "--entry 'python src/run.py --epochs 5'."
    )


def archive_folder(folder: Path, stack: ExitStack) -> Path:
    """The folder as a .tar.gz in a temporary file, without VCS and cache folders."""
    temporary = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nightshift-")))
    target = temporary / f"{slug(folder.resolve().name) or 'project'}.tar.gz"
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
        err.print(
            f"Left out {counted(len(skipped_links), 'symbolic link')}: "
            f"{', '.join(skipped_links[:5])}"
        )
    return target


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._-")[:60]


def progress_file(path: Path, stack: ExitStack, *, label: str) -> tuple[str, Any]:
    size = path.stat().st_size
    stream = stack.enter_context(path.open("rb"))
    if size < 1024 * 1024 or not err.is_terminal:
        return path.name, stream
    progress = stack.enter_context(transfer_progress())
    task = progress.add_task(label, total=size)
    return path.name, ProgressReader(stream, lambda n: progress.advance(task, n))


def transfer_progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )


def describe_state(job: dict) -> str:
    text = f"{job['state_label']}"
    if job.get("workstation") and job["state"] == "running":
        text += f" on {job['workstation']}"
    if job.get("match_problem"):
        text += f" — {job['match_problem']}"
    elif job.get("wait_reason") and job["state"] in ("idle", "queued"):
        text += f" — {job['wait_reason']}"
    return text


def report_change(job: dict, previous: str | None) -> str:
    described = describe_state(job)
    if described != previous:
        err.print(Text.assemble((now_text(), "dim"), " ", described))
    return described


def now_text() -> str:
    return datetime.now().strftime("%H:%M:%S")


def wait_until_final(client: Client, job: dict) -> dict:
    previous = None
    while True:
        previous = report_change(job, previous)
        if job["is_final"] or job["state"] == "held":
            return job
        time.sleep(POLL_SECONDS)
        job = client.get(f"/jobs/{job['id']}/")


def follow_log(client: Client, job: dict, stream: str) -> dict:
    """Print the log as it grows until the job ends; reports state changes on stderr."""
    offset, previous = 0, None
    while True:
        previous = report_change(job, previous)
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
                job = wait_for_outputs(client, job)
                chunk = client.get(f"/jobs/{job['id']}/logs/{stream}/", offset=offset)
                sys.stdout.write(chunk["text"])
                sys.stdout.flush()
            return job
        time.sleep(POLL_SECONDS / 2)
        job = client.get(f"/jobs/{job['id']}/")


def wait_for_outputs(client: Client, job: dict, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while not job["outputs_ready"] and time.monotonic() < deadline:
        time.sleep(1)
        job = client.get(f"/jobs/{job['id']}/")
    return job


def exit_status(job: dict) -> int:
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


def report_submitted(obj: Context, job: dict, *, wait: bool, follow: bool, as_json: bool) -> None:
    """After a submission: the job (as JSON, or a line naming it), then with --follow its
    output, or with --wait its end, exiting with its status."""
    if as_json and not (wait or follow):
        print_json(job)
        return
    err.print(f"Submitted “{job['name']}” as {job['id']}  ({job['links']['web']})")
    if follow:
        job = follow_log(obj.client, job, "stdout")
    elif wait:
        job = wait_until_final(obj.client, job)
    else:
        return
    if as_json:
        print_json(job)
    sys.exit(exit_status(job))


# A job's id or the start of it (at least 4 characters), as the API's addresses take it.
JOB_REFERENCE = re.compile(r"[0-9a-fA-F][0-9a-fA-F-]{3,35}")


def job_resolve(client: Client, job_id: str) -> dict:
    """A job by its full id or by the start of it, as `nightshift list` shows it. The API
    finds it, and says which jobs an ambiguous start matches."""
    reference = job_id.strip()
    if not JOB_REFERENCE.fullmatch(reference):
        raise ApiError(f"{job_id!r} is not a job id; `nightshift list` shows them.", code="invalid")
    try:
        return client.get(f"/jobs/{reference}/")
    except ApiError as exc:
        if exc.code == "not_found":
            whose = "is" if len(reference) >= 32 else "starts with"
            raise ApiError(
                f"No such job: you have no job whose id {whose} {reference}.",
                code="not_found",
                status=exc.status,
            ) from None
        raise


def when_text(value: str | None) -> str:
    if not value:
        return ""
    return datetime.fromisoformat(value).astimezone().strftime("%Y-%m-%d %H:%M")


def gpus_text(request: dict) -> str:
    if not request["gpus"]:
        return "CPU"
    text = f"{request['gpus']}"
    if request.get("gpu_memory_gb"):
        text += f" ≥{request['gpu_memory_gb']:g}GB"
    return text


def asked_for(request: dict) -> str:
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


def new_table(*columns: str) -> Table:
    """A table as every listing prints it: no borders, bold headings, flush left."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column)
    return table


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


STATE_STYLES = {
    "completed": "green",
    "failed": "red",
    "held": "yellow",
    "running": "cyan",
    "removed": "dim",
}


def counted(count: float, thing: str, things: str | None = None) -> str:
    """`1 GPU`, `2 GPUs`, `0 GPUs`: a number with its noun, in the form the number takes."""
    return f"{count:g} {thing if count == 1 else (things or thing + 's')}"


def size_text(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count} B"
