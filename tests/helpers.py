import contextlib
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T], *, timeout: float = 120, interval: float = 0.5, what: str = "condition"
) -> T:
    """Poll `probe` until it returns something truthy; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def free_port() -> int:
    """A port of 127.0.0.1 that the kernel says is free now, for a server the test starts.
    Never a fixed number: another process on a CI machine may hold any one of them."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def htcondor_copies(bridge, job_id: str) -> set[tuple[int, int]]:
    """The HTCondor jobs (cluster, proc) carrying a Nightshift id, queue plus history. Asked
    queue first, so a job leaving the queue between the two questions is met in the history,
    and counted once by its id rather than twice."""
    in_queue = {(o.cluster_id, o.proc_id) for o in bridge.active_jobs() if o.job_id == job_id}
    return in_queue | {(o.cluster_id, o.proc_id) for o in bridge.finished_jobs([job_id])}


def copy_job_helpers(directory: Path) -> None:
    """The helper folder the portal stages into every job (a GPU job runs its launcher)."""
    from jobs.staging import HELPER_FILES

    helper = Path(directory) / ".nightshift"
    helper.mkdir(exist_ok=True)
    for module, name in HELPER_FILES:
        shutil.copyfile(module, helper / name)


def make_job_dir(jobs_dir: Path, script: str, *, uid: int | None) -> tuple[str, Path]:
    """A job folder inside the pool-visible jobs directory, owned by the pool's account,
    with the helper files the portal stages."""
    job_id = str(uuid.uuid4())
    directory = Path(jobs_dir) / f"contract-{job_id}"
    (directory / "outputs").mkdir(parents=True)
    (directory / "train.py").write_text(script)
    copy_job_helpers(directory)
    if uid is not None:
        for path in (directory, directory / "outputs", directory / ".nightshift"):
            os.chown(path, uid, -1)
    return job_id, directory


# HTCondor tools inside the pool's root must not see the portal's own HTCondor settings.
CLEAN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
POOL_ROOT = Path(os.environ.get("NIGHTSHIFT_POOL_ROOT", "/var/lib/nightshift/pool-root"))


def pool_command(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """An HTCondor tool inside the personal pool's root, as its administrator runs it."""
    return subprocess.run(
        ["chroot", str(POOL_ROOT), *args],
        env=CLEAN_ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
    )


def job_story(job, workstation: str | None = None) -> str:
    """What the portal and the pool say happened to a job, for a failing assertion's message:
    its events, its usage records, HTCondor's dates and counters for it, and the end of the
    workstation's startd log (the pool's logs are gone once CI's machine is)."""
    lines = [f"events: {list(job.events.order_by('pk').values_list('kind', 'detail'))}"]
    for record in job.usage_records.order_by("started_at"):
        ending = record.ended_by or "open"
        lines.append(
            f"run: {record.started_at} - {record.ended_at} on {record.workstation} "
            f"({ending}, {record.wall_s} s)"
        )
    if job.cluster_id is not None:
        attributes = (
            "JobStatus",
            "NumJobStarts",
            "NumShadowStarts",
            "NumShadowExceptions",
            "JobCurrentStartDate",
            "RemoteWallClockTime",
            "LastVacateTime",
            "LastRemoteHost",
            "LastHoldReason",
            "LastRejMatchReason",
        )
        for tool in ("condor_q", "condor_history"):
            found = pool_command(
                tool, f"{job.cluster_id}.{job.proc_id}", "-af:lr", *attributes, check=False
            ).stdout.strip()
            lines.append(f"{tool}: {found or '(not there)'}")
    if workstation:
        log = POOL_ROOT / "var/log/condor" / f"StartLog.{workstation}"
        lines_of_log = log.read_text(errors="replace").splitlines() if log.exists() else []
        # The owner probe starts every 5 s and says nothing of the job.
        tail = [line for line in lines_of_log if "STARTD_CRON" not in line][-40:]
        lines += [f"{log.name}:", *tail]
    return "\n".join(lines)


class OwnerAtDesk:
    """Plays a personal-pool workstation's owner using its GPU, through the execute-node
    kit's owner-GPU probe override file (deploy/personal-pool/nightshift-pool.conf)."""

    def __init__(self) -> None:
        self.present: set[str] = set()

    def returns_to(self, workstation: str) -> None:
        (POOL_ROOT / "var/lib/nightshift-owner" / workstation).write_text("active\n")
        self.present.add(workstation)

    def leaves(self, workstation: str) -> None:
        (POOL_ROOT / "var/lib/nightshift-owner" / workstation).unlink(missing_ok=True)
        self.present.discard(workstation)

    def leave_all(self) -> None:
        for workstation in list(self.present):
            self.leaves(workstation)


def owners_present() -> set[str]:
    """The workstations whose owner-GPU probe says the owner is back."""
    ads = pool_command("condor_status", "-af", "Machine", "Name", "OwnerGpuActive").stdout
    return {line.split()[1].split("@")[1] for line in ads.splitlines() if line.endswith("true")}


def pool_config(text: str | None, name: str = "60-test.conf") -> None:
    """Write (or with None remove) a config file in the personal pool and reconfigure it."""

    path = POOL_ROOT / "etc/condor/config.d" / name
    if text is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(text)
        path.chmod(0o644)  # the daemons read their config as the condor account
    for attempt in range(5):  # the master refuses commands for a moment after a reconfig
        done = pool_command("condor_reconfig", check=False)
        if done.returncode == 0:
            return
        time.sleep(2)
    raise AssertionError(f"condor_reconfig failed: {done.stdout}{done.stderr}")


POOL_SCRIPT = str(Path(__file__).resolve().parents[1] / "deploy/personal-pool/pool")


def pool_schedds(count: int) -> list[str]:
    """Runs the personal pool's second schedd (2) or stops it (1); the schedds' names."""
    done = subprocess.run(
        [POOL_SCRIPT, "schedds", str(count)], capture_output=True, text=True, timeout=240
    )
    if done.returncode != 0:
        message = done.stderr or done.stdout
        raise AssertionError(f"pool schedds {count} exited {done.returncode}: {message}")
    return done.stdout.split()


def schedd_answers() -> bool:
    return pool_command("condor_q", "-totals", check=False).returncode == 0


def pool_restarts_cleanly() -> None:
    """Leaves the pool as the next tests expect it. After a schedd stopped with condor_off
    and started again, the personal pool's negotiator was seen failing to open a session
    to it ("failed to create non-negotiated security session"), so that some later jobs
    never matched; a restart of every daemon clears that."""
    pool_command("condor_restart")
    time.sleep(5)
    wait_for(schedd_answers, timeout=180, what="the schedd after a pool restart")

    def all_workstations_back() -> bool:
        done = pool_command("condor_status", "-af", "Name", check=False)
        slots = [name for name in done.stdout.split() if name.startswith("slot1@")]
        return done.returncode == 0 and len(slots) >= 4

    wait_for(all_workstations_back, timeout=180, what="the workstations after a pool restart")


KIT_TOKEN_IN_ROOT = "etc/condor/nightshift-kit-test.token"


@contextlib.contextmanager
def kit_cron_reading(portal_url: str, token: str, *, config: str):
    """Every workstation's startd runs the kit's cron job every 5 s against `portal_url`
    with `token`, until the block ends. A startd keeps what the job last published after it
    is turned off: wait, inside the block, for it to publish that nothing holds."""
    token_file = POOL_ROOT / KIT_TOKEN_IN_ROOT
    token_file.write_text(token + "\n")
    token_file.chmod(0o644)  # a test token; the kit's own is readable by the condor account only
    pool_config(
        f"NIGHTSHIFT_PORTAL_URL = {portal_url}\n"
        f"NIGHTSHIFT_PORTAL_TOKEN_FILE = /{KIT_TOKEN_IN_ROOT}\n"
        "STARTD_CRON_JOBLIST = $(STARTD_CRON_JOBLIST) PLACEMENT\n"
        "VOLTA.STARTD_CRON_JOBLIST = OWNERGPU PLACEMENT\n"
        "STARTD_CRON_PLACEMENT_PERIOD = 5s\n",
        name=config,
    )
    try:
        yield
    finally:
        pool_config(None, name=config)
        token_file.unlink(missing_ok=True)
