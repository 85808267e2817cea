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

import contextlib
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
    "serve_socket",
    "serve_port",
    "run_notebook",
]

_path = os.path.abspath(os.environ.get("NIGHTSHIFT_METRICS_FILE", "metrics.jsonl"))
_next_step = 0
_checkpoint_dir = os.path.abspath(os.environ.get("NIGHTSHIFT_CHECKPOINT_DIR", "checkpoint"))
# HTCondor's checkpoint_exit_code: exiting with it means "saved, start me again".
CHECKPOINT_EXIT_CODE = int(os.environ.get("NIGHTSHIFT_CHECKPOINT_EXIT_CODE", "85"))
# Checkpoint this often even without SIGTERM (0: only when asked to stop), unless the
# workstation's machine ad says better (_checkpoint_plan).
_interval_s = float(os.environ.get("NIGHTSHIFT_CHECKPOINT_INTERVAL_S", "0") or 0)
# What one save costs, until this job has measured its own.
_DEFAULT_SAVE_S = float(os.environ.get("NIGHTSHIFT_CHECKPOINT_COST_S", "60") or 60)
_started = time.monotonic()
_plan: tuple[float, float | None] | None = None
_stop_requested = False
_previous_handler = None
_notice: float | None = None
_notice_read_at = 0.0
_notice_answered: float | None = None


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


def _daly_interval_s(cost_s: float, mean_s: float) -> float:
    """Daly's first-order optimum, clamped to 5 minutes to 6 hours; the portal's own is
    forecasts.model.checkpoints.daly_interval_s (this module may import nothing of it)."""
    interval = mean_s if cost_s >= 2 * mean_s else math.sqrt(2 * cost_s * mean_s) - cost_s
    return min(6 * 3600.0, max(300.0, interval))


def _machine_ad() -> dict[str, str]:
    """The workstation's machine ad as HTCondor wrote it for the job: each attribute's value
    as written (strings keep their quotes)."""
    found: dict[str, str] = {}
    try:
        with open(os.environ.get("_CONDOR_MACHINE_AD") or ".machine.ad", encoding="utf-8") as ad:
            for line in ad:
                name, _, value = line.partition("=")
                found[name.strip()] = value.strip()
    except OSError:
        pass
    return found


def _machine_string(name: str) -> str | None:
    """A string attribute of the workstation's machine ad."""
    value = _machine_ad().get(name, "")
    return value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else None


def _reclaim_noticed_at() -> float | None:
    """When the workstation's owner asked for it back, while they still want it: the notice
    its kit writes (NightshiftReclaimNotice), read at most every 5 s."""
    global _notice_read_at, _notice
    if _notice_read_at and time.monotonic() - _notice_read_at < 5:
        return _notice
    _notice_read_at = time.monotonic()
    _notice = None
    path = _machine_string("NightshiftReclaimNotice")
    if path:
        try:
            with open(path, encoding="utf-8") as stream:
                notice = json.load(stream)
            if float(notice["reclaim_by"]) > time.time():
                _notice = float(notice["noticed_at"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return _notice


def _last_saved_at() -> float:
    """When this job last saved a checkpoint (checkpoint_and_exit logs it), or 0."""
    try:
        with open(os.path.join(os.path.dirname(_checkpoint_dir), "checkpoints.jsonl")) as log:
            return float(json.loads(log.read().strip().splitlines()[-1])["time"])
    except (OSError, IndexError, KeyError, TypeError, ValueError):
        return 0.0


def _machine_figures() -> dict[str, int]:
    """The workstation's checkpoint figures from its machine ad (the kit publishes them):
    NightshiftMeanFreeS and NightshiftPossibleReturnAt, where they are numbers."""
    ad = _machine_ad()
    found: dict[str, int] = {}
    for name in ("NightshiftMeanFreeS", "NightshiftPossibleReturnAt"):
        with contextlib.suppress(ValueError):
            found[name] = int(ad.get(name, ""))
    return found


def _save_cost_s() -> float:
    """What this job's last save took (checkpoint_and_exit logs it), else the default."""
    try:
        with open(os.path.join(os.path.dirname(_checkpoint_dir), "checkpoints.jsonl")) as log:
            last = log.read().strip().splitlines()[-1]
        return max(1.0, float(json.loads(last)["save_s"]))
    except (OSError, IndexError, KeyError, TypeError, ValueError):
        return _DEFAULT_SAVE_S


def _checkpoint_plan() -> tuple[float, float | None]:
    """(interval in seconds, or 0; a Unix time to save at, or None), decided once per run.

    On a workstation whose kit publishes its figures: Daly's interval for the mean time until
    its owner comes back and this job's cost of a save, and one save just before the return
    its owner may be back by. Elsewhere: NIGHTSHIFT_CHECKPOINT_INTERVAL_S. An interval of 0
    there (only when asked to stop) is kept."""
    global _plan
    if _plan is None:
        figures = _machine_figures() if _interval_s > 0 else {}
        cost = _save_cost_s()
        interval = _interval_s
        if figures.get("NightshiftMeanFreeS", 0) > 0:
            interval = _daly_interval_s(cost, figures["NightshiftMeanFreeS"])
        save_at = None
        if "NightshiftPossibleReturnAt" in figures:
            before = figures["NightshiftPossibleReturnAt"] - max(120.0, 2 * cost)
            save_at = before if before > time.time() + 60 else None
        _plan = (interval, save_at)
        helper = os.environ.get("NIGHTSHIFT_HELPER_DIR")
        if helper and os.path.isdir(helper):
            with open(os.path.join(helper, "checkpoint-plan.json"), "w", encoding="utf-8") as out:
                json.dump({"interval_s": round(interval), "save_at": save_at, "cost_s": cost}, out)
    return _plan


def should_checkpoint() -> bool:
    """True after SIGTERM; once when the workstation's owner has asked for it back (before
    the SIGTERM comes); when the checkpoint interval has passed since this run began (timed
    by the workstation where its kit publishes figures); or just before the time its owner
    may be back by."""
    global _notice_answered
    _install_handler()
    if _stop_requested:
        return True
    noticed_at = _reclaim_noticed_at()
    if noticed_at is not None and noticed_at != _notice_answered:
        _notice_answered = noticed_at
        # Once per request: a job restarted from the checkpoint it saved for it goes on.
        if _last_saved_at() < noticed_at:
            return True
    interval, save_at = _checkpoint_plan()
    if save_at is not None and time.time() >= save_at:
        return True
    return interval > 0 and time.monotonic() - _started >= interval


def checkpoint_and_exit(save: Callable[[str], object] | None = None) -> None:
    """Save with `save(folder)` and exit with the checkpoint code; HTCondor restarts the job.

    `save` writes into a fresh temporary folder that then replaces the checkpoint folder in
    one rename, so that an eviction in the middle of saving never leaves half a checkpoint.
    Without `save`, whatever the job already wrote to checkpoint_dir() is the checkpoint.
    """
    target = checkpoint_dir()
    began = time.monotonic()
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
        record = {"time": round(time.time(), 3), "save_s": round(time.monotonic() - began, 3)}
        log_file.write(json.dumps(record) + "\n")
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


def serve_socket() -> str:
    """The Unix socket a job that serves HTTP listens on; the portal gives it an
    authenticated URL. Only the job's own account reaches it, where a port of 127.0.0.1 is
    open to every job on the workstation, so prefer it: uvicorn.run(app, uds=...), or
    gunicorn --bind unix:PATH. Raises RuntimeError in a job submitted without "serve"."""
    path = os.environ.get("NIGHTSHIFT_SERVE_SOCKET")
    if not path:
        raise RuntimeError("this job was not submitted to serve HTTP (turn on Serve)")
    return path


def serve_port() -> int:
    """The port of 127.0.0.1 a job that serves HTTP may bind instead of serve_socket(), for
    a server that cannot listen on a Unix socket. Other jobs on the same workstation can
    reach it. Raises RuntimeError in a job submitted without "serve"."""
    port = os.environ.get("NIGHTSHIFT_SERVE_PORT")
    if not port:
        raise RuntimeError("this job was not submitted to serve HTTP (turn on Serve)")
    return int(port)


# Why a notebook session ended, for its page: {"reason": "time limit" | "idle" | "stopped"}.
SESSION_END_FILE = "session-end.json"


def run_notebook() -> None:
    """A notebook session's script: JupyterLab on the socket the launcher chose, under the path
    the portal's live proxy serves it at, on the session folder (the job's outputs, which
    are kept). It ends at the session's time limit, after its idle time, or when HTCondor
    stops the job; the reason is left in the helper folder. Needs jupyterlab in the job's
    environment."""
    import subprocess

    helper = os.environ.get("NIGHTSHIFT_HELPER_DIR", ".nightshift")
    listen = os.environ.get("NIGHTSHIFT_LIVE_SOCKET")
    if not listen:
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
        # A Unix socket only the job's account reaches: every job on the workstation
        # shares 127.0.0.1.
        f"--ServerApp.sock={listen}",
        "--ServerApp.sock_mode=0600",
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
    # The kernels' connection files hold their signing keys, and kernels listen on ports of
    # 127.0.0.1 that every job reaches: keep them beside the socket, in the job's private
    # folder that HTCondor removes with it, never in a home that jobs share.
    environment["JUPYTER_RUNTIME_DIR"] = os.path.join(os.path.dirname(listen), "jupyter-runtime")
    os.makedirs(environment["JUPYTER_RUNTIME_DIR"], mode=0o700, exist_ok=True)
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
