"""Nightshift's job helper: metrics the job page plots, and checkpoints that survive evictions.

    import nightshift
    for step in range(100):
        ...
        nightshift.log(step=step, loss=loss, accuracy=accuracy)

Each call appends one JSON line, e.g. {"step": 3, "loss": 0.42, "accuracy": 0.8}, to the
file named by NIGHTSHIFT_METRICS_FILE. Nightshift puts this module on PYTHONPATH
(NIGHTSHIFT_HELPER_DIR) of every job. It needs nothing but the standard library, and it
works outside Nightshift too (it then writes ./metrics.jsonl).

Datasets attached to the job are read-only folders: `nightshift.dataset_path("mnist")`, and
so are published models: `nightshift.model_path("sentiment")`.

Workstations belong to people who come back. When one does, HTCondor sends the job SIGTERM
and, after a grace period, kills it; the job then starts again on another workstation. A
job that saves its state to `checkpoint_dir()` resumes from there instead of from zero:

    state = load(nightshift.checkpoint_dir())       # None on the first run
    for epoch in range(state.epoch if state else 0, epochs):
        train_one_epoch()
        if nightshift.should_checkpoint():          # SIGTERM came, or it is time
            nightshift.checkpoint_and_exit(lambda folder: save(folder, epoch + 1))

`checkpoint_and_exit()` saves, then exits with NIGHTSHIFT_CHECKPOINT_EXIT_CODE: HTCondor keeps
the folder and starts the script again at once (or, after SIGTERM, on the next workstation).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable

__all__ = [
    "log",
    "metrics_path",
    "checkpoint_dir",
    "should_checkpoint",
    "checkpoint_and_exit",
    "stop_requested",
    "should_stop",
    "dataset_path",
    "model_path",
    "tensorboard_dir",
    "serve_port",
    "run_notebook",
]

_path = os.path.abspath(os.environ.get("NIGHTSHIFT_METRICS_FILE", "metrics.jsonl"))
_next_step = 0
_checkpoint_dir = os.path.abspath(os.environ.get("NIGHTSHIFT_CHECKPOINT_DIR", "checkpoint"))
# HTCondor's checkpoint_exit_code: exiting with it means "saved, start me again".
CHECKPOINT_EXIT_CODE = int(os.environ.get("NIGHTSHIFT_CHECKPOINT_EXIT_CODE", "85"))
# Checkpoint this often even without SIGTERM (0: only when asked to stop).
_interval_s = float(os.environ.get("NIGHTSHIFT_CHECKPOINT_INTERVAL_S", "0") or 0)
_started = time.monotonic()
_stop_requested = False
_previous_handler = None


def metrics_path() -> str:
    return _path


def log(step: int | None = None, **metrics: float) -> None:
    """Record numeric metrics for one step. Without `step`, steps count up from 0."""
    global _next_step
    if step is None:
        step = _next_step
    if isinstance(step, bool) or not isinstance(step, int):
        raise TypeError("step must be a whole number")
    row: dict[str, float | int | None] = {"step": step}
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            try:
                value = float(value)  # numpy and torch scalars
            except (TypeError, ValueError):
                raise TypeError(f"metric {name!r} must be a number, not {value!r}") from None
        row[name] = value if math.isfinite(value) else None
    row["time"] = round(time.time(), 3)
    _next_step = step + 1
    os.makedirs(os.path.dirname(_path), exist_ok=True)
    with open(_path, "a", encoding="utf-8") as stream:
        stream.write(json.dumps(row) + "\n")


# -- checkpoints -------------------------------------------------------------------------------


def _on_sigterm(signum, frame) -> None:
    global _stop_requested
    _stop_requested = True


def _install_handler() -> None:
    """Turn SIGTERM (the owner is back) into a request to checkpoint, once."""
    global _previous_handler
    if _previous_handler is not None:
        return
    try:
        _previous_handler = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: SIGTERM keeps its default meaning
        _previous_handler = signal.SIG_DFL


def dataset_path(name: str) -> str:
    """The read-only folder of the dataset `name` that the job was given (datasets/<name>/).

    Raises LookupError, naming the datasets the job has, for a name it was not given.
    """
    return _given_folder("NIGHTSHIFT_DATASETS_DIR", "datasets", "dataset", name)


def model_path(name: str) -> str:
    """The read-only folder of the published model `name` that the job was given
    (models/<name>/, for fine-tuning or evaluation). Raises LookupError as dataset_path."""
    return _given_folder("NIGHTSHIFT_MODELS_DIR", "models", "model", name)


def _given_folder(variable: str, default: str, what: str, name: str) -> str:
    folder = os.environ.get(variable) or os.path.abspath(default)
    path = os.path.join(folder, name)
    if "/" in name or name in ("", ".", "..") or not os.path.isdir(path):
        given = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        raise LookupError(
            f"this job has no {what} {name!r}; it has {', '.join(given) or 'none'}"
            f" (attach {what}s when submitting the job)"
        )
    return path


def checkpoint_dir() -> str:
    """The folder whose contents survive an eviction; it exists, empty on the first run.

    Calling it (or should_checkpoint) also makes SIGTERM a request to checkpoint rather
    than the end of the process.
    """
    _install_handler()
    os.makedirs(_checkpoint_dir, exist_ok=True)
    return _checkpoint_dir


def stop_requested() -> bool:
    """True once HTCondor asked the job to stop (SIGTERM): save now, the grace period runs."""
    _install_handler()
    return _stop_requested


def should_stop() -> bool:
    """True once Nightshift asked this run to end early: a hyperparameter study pruned it,
    its intermediate values being worse than other trials'. Stop cleanly (and exit 0);
    a run that carries on is removed after a grace period."""
    helper = os.environ.get("NIGHTSHIFT_HELPER_DIR", ".nightshift")
    return os.path.exists(os.path.join(helper, "control", "stop"))


def should_checkpoint() -> bool:
    """True after SIGTERM, or when the checkpoint interval has passed since this run began."""
    _install_handler()
    if _stop_requested:
        return True
    return _interval_s > 0 and time.monotonic() - _started >= _interval_s


def checkpoint_and_exit(save: Callable[[str], object] | None = None) -> None:
    """Save with `save(folder)` and exit with the checkpoint code; HTCondor restarts the job.

    `save` writes into a fresh temporary folder that then replaces the checkpoint folder in
    one rename, so that an eviction in the middle of saving never leaves half a checkpoint.
    Without `save`, whatever the job already wrote to checkpoint_dir() is the checkpoint.
    """
    target = checkpoint_dir()
    if save is not None:
        parent = os.path.dirname(target)
        staging = tempfile.mkdtemp(prefix=".checkpoint-", dir=parent)
        try:
            save(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        previous = target + ".previous"
        shutil.rmtree(previous, ignore_errors=True)
        os.replace(target, previous)
        os.replace(staging, target)
        shutil.rmtree(previous, ignore_errors=True)
    # When it was saved, for the portal's accounting of the work an eviction lost.
    with open(os.path.join(os.path.dirname(target), "checkpoints.jsonl"), "a") as log_file:
        log_file.write(json.dumps({"time": round(time.time(), 3)}) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(CHECKPOINT_EXIT_CODE)


def tensorboard_dir() -> str:
    """Where to write TensorBoard event files, e.g. SummaryWriter(nightshift.tensorboard_dir()).

    Inside the job's outputs, so that they are kept. A job submitted with TensorBoard on
    (and tensorboard in its environment) shows them live through the portal."""
    default = os.path.join(os.environ.get("NIGHTSHIFT_OUTPUT_DIR") or "outputs", "tensorboard")
    folder = os.path.abspath(os.environ.get("NIGHTSHIFT_TENSORBOARD_DIR") or default)
    os.makedirs(folder, exist_ok=True)
    return folder


def serve_port() -> int:
    """The port a job that serves HTTP binds on 127.0.0.1; the portal gives it an
    authenticated URL. Raises RuntimeError in a job submitted without "serve"."""
    port = os.environ.get("NIGHTSHIFT_SERVE_PORT")
    if not port:
        raise RuntimeError("this job was not submitted to serve HTTP (turn on Serve)")
    return int(port)


# Why a notebook session ended, for its page: {"reason": "time limit" | "idle" | "stopped"}.
SESSION_END_FILE = "session-end.json"


def run_notebook() -> None:
    """A notebook session's script: JupyterLab on the port the launcher chose, under the path
    the portal's live proxy serves it at, on the session folder (the job's outputs, which
    are kept). It ends at the session's time limit, after its idle time, or when HTCondor
    stops the job; the reason is left in the helper folder. Needs jupyterlab in the job's
    environment."""
    import subprocess

    helper = os.environ.get("NIGHTSHIFT_HELPER_DIR", ".nightshift")
    port = os.environ.get("NIGHTSHIFT_LIVE_PORT")
    if not port:
        raise RuntimeError("run_notebook() runs in a Nightshift notebook session")
    with open(os.path.join(helper, "live-secret"), encoding="utf-8") as stream:
        secret = stream.read().strip()
    root = os.path.abspath(os.environ.get("NIGHTSHIFT_OUTPUT_DIR") or "outputs")
    os.makedirs(root, exist_ok=True)
    idle = int(os.environ.get("NIGHTSHIFT_SESSION_IDLE_S") or 0)
    limit = float(os.environ.get("NIGHTSHIFT_SESSION_LIMIT_S") or 0)
    base = os.environ.get("NIGHTSHIFT_LIVE_PATH", "/live/job/") + "notebook/"
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.base_url={base}",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.allow_remote_access=False",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=None",  # workstations need not reach jupyter.org
    ]
    if idle:
        command += [
            f"--ServerApp.shutdown_no_activity_timeout={idle}",
            f"--MappingKernelManager.cull_idle_timeout={idle}",
            "--MappingKernelManager.cull_interval=60",
            f"--TerminalManager.cull_inactive_timeout={idle}",
        ]
    # The token in the environment, not the command line: other people on the desktop can
    # read command lines. The portal's proxy adds it to every request it lets in.
    environment = dict(os.environ, JUPYTER_TOKEN=secret)
    # JupyterLab's own state (open tabs, settings) in this session's folder, not in the home
    # of the account every job on the workstation shares: one session must never reopen,
    # or see, another's.
    state = os.path.abspath(os.path.join(helper, "jupyter"))
    folders = (("JUPYTERLAB_WORKSPACES_DIR", "workspaces"), ("JUPYTERLAB_SETTINGS_DIR", "settings"))
    for variable, folder in folders:
        environment[variable] = os.path.join(state, folder)
        os.makedirs(environment[variable], mode=0o700, exist_ok=True)
    print(
        f"nightshift: JupyterLab on {root}, ends after {limit / 3600:g} h"
        + (f" or {idle // 60} minutes idle" if idle else ""),
        flush=True,
    )
    # In the session folder: the job's own folder holds its script, whose name a module
    # Jupyter imports could share.
    server = subprocess.Popen(command, env=environment, cwd=root)  # noqa: S603 - no shell
    reason = "idle"

    def stop(signum, frame) -> None:
        nonlocal reason
        reason = "stopped"
        server.terminate()

    signal.signal(signal.SIGTERM, stop)
    try:
        server.wait(timeout=limit or None)
    except subprocess.TimeoutExpired:
        reason = "time limit"
        server.terminate()
    try:
        status = server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        status = server.wait()
    if reason == "idle" and status != 0:
        reason = "failed"
    with open(os.path.join(helper, SESSION_END_FILE), "w", encoding="utf-8") as stream:
        json.dump({"reason": reason, "time": time.time(), "exit_code": status}, stream)
    print(f"nightshift: the session ended ({reason})", flush=True)
    sys.exit(0 if reason in ("idle", "time limit", "stopped") else status or 1)
