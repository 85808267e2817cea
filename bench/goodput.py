"""Goodput under owners who come back: the same training workload with and without checkpoints.

Runs on the personal pool, with Nightshift's own submit description (shared file system) and
its job helper. The workload is STEPS steps of STEP_S seconds of "training". A scripted
owner-return trace evicts the job: each time it has run RUN_BEFORE_OWNER_S seconds on a
workstation, that workstation's owner comes back (the execute-node kit's owner-GPU probe,
through its override file) and stays OWNER_STAYS_S seconds; EVICTIONS times in all.

For each variant it prints, from HTCondor's own accounting (the job's history ad):
- goodput = useful compute (STEPS x STEP_S) / total compute (RemoteWallClockTime);
- time to finish (CompletionDate - QDate) and the number of runs (NumJobStarts).

Run with `make bench-goodput` (as root: it starts the pool and plays the owners). `--quick`
(16 steps, one eviction after 2 s) is the mode make test runs; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import threading
import time
import uuid
from pathlib import Path

from portal_setup import setup_django

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--quick", action="store_true", help="a short workload, one eviction")
QUICK = parser.parse_args().quick

# Django only for the portal's own list of what a job's helper folder holds.
REPO = setup_django(fake_bridge=False)

from django.conf import settings  # noqa: E402

from condor_bridge import FileMode, JobRequest, JobState  # noqa: E402
from condor_bridge.schedd import HTCondorBridge  # noqa: E402
from jobs.staging import HELPER_FILES  # noqa: E402

STEPS = 16 if QUICK else 120
STEP_S = 0.25
EVICTIONS = 1 if QUICK else 3
RUN_BEFORE_OWNER_S = 2 if QUICK else 12
OWNER_STAYS_S = 5
JOBS_DIR = Path(os.environ.get("NIGHTSHIFT_JOBS_DIR", REPO / "var" / "jobs"))
TOKEN_DIR = os.environ.get("CONDOR_TOKEN_DIR", str(REPO / "var" / "condor-tokens"))
POOL_ROOT = Path(os.environ.get("NIGHTSHIFT_POOL_ROOT", "/var/lib/nightshift/pool-root"))
OWNER_DIR = POOL_ROOT / "var/lib/nightshift-owner"
UID = int(os.environ.get("NIGHTSHIFT_JOB_DIR_UID", "2000"))

CHECKPOINTING = f"""
import json, os, time
import nightshift

state = os.path.join(nightshift.checkpoint_dir(), "state.json")
step = json.load(open(state))["step"] if os.path.exists(state) else 0
while step < {STEPS}:
    time.sleep({STEP_S})
    step += 1
    nightshift.log(step=step, loss=1 / step)
    if nightshift.should_checkpoint():
        def save(folder, step=step):
            json.dump({{"step": step}}, open(os.path.join(folder, "state.json"), "w"))
        nightshift.checkpoint_and_exit(save)
"""

FROM_ZERO = f"""
import time
import nightshift

for step in range(1, {STEPS} + 1):
    time.sleep({STEP_S})
    nightshift.log(step=step, loss=1 / step)
"""


def job_folder(script: str) -> tuple[str, Path]:
    job_id = str(uuid.uuid4())
    folder = JOBS_DIR / f"bench-goodput-{job_id}"
    (folder / ".nightshift").mkdir(parents=True)
    (folder / "outputs").mkdir()
    (folder / "train.py").write_text(script)
    # The helper folder the portal stages into every job (a GPU job runs under the launcher).
    for module, name in HELPER_FILES:
        shutil.copy(module, folder / ".nightshift" / name)
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, UID, -1)
    return job_id, folder


def play_owners(bridge: HTCondorBridge, job_id: str, log: list[str]) -> None:
    """The trace: after RUN_BEFORE_OWNER_S s of each run, its workstation's owner returns."""
    for eviction in range(EVICTIONS):
        started = None
        while True:
            job = bridge.find(job_id)
            if job is None or not job.in_queue or job.state is JobState.COMPLETED:
                return
            if job.state is JobState.RUNNING and job.workstation:
                started = started or time.monotonic()
                if time.monotonic() - started >= RUN_BEFORE_OWNER_S:
                    break
            else:
                started = None
            time.sleep(0.5)
        station = job.workstation
        (OWNER_DIR / station).write_text("active\n")
        log.append(f"owner {eviction + 1} back at {station}")
        time.sleep(OWNER_STAYS_S)
        (OWNER_DIR / station).unlink(missing_ok=True)


def run(bridge: HTCondorBridge, name: str, script: str) -> dict:
    job_id, folder = job_folder(script)
    request = JobRequest(
        job_id=job_id,
        job_dir=str(folder),
        script_name="train.py",
        gpus=1,
        memory_mb=256,
        vacate_grace_s=60,
        checkpoint_interval_s=0,
    )
    result = bridge.submit(request, check_existing=False)
    events: list[str] = []
    owners = threading.Thread(target=play_owners, args=(bridge, job_id, events), daemon=True)
    owners.start()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        found = bridge.finished_jobs([job_id])
        if found:
            break
        time.sleep(1)
    else:
        bridge.act("remove", result.cluster_id, result.proc_id, reason="bench timeout")
        raise SystemExit(f"{name}: did not finish within 10 minutes")
    owners.join(timeout=30)
    ad = bridge.job_ad(job_id)
    useful = STEPS * STEP_S
    total = float(ad["RemoteWallClockTime"])
    shutil.rmtree(folder, ignore_errors=True)
    return {
        "name": name,
        "goodput": useful / total,
        "total": total,
        "finish": float(ad["CompletionDate"]) - float(ad["QDate"]),
        "runs": int(ad["NumJobStarts"]),
        "events": events,
    }


def main() -> None:
    OWNER_DIR.mkdir(parents=True, exist_ok=True)
    bridge = HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=TOKEN_DIR,
        mode=FileMode.SHARED,
        instance=f"bench-goodput-{uuid.uuid4().hex[:8]}",
    )
    print(
        f"workload: {STEPS} steps x {STEP_S} s = {STEPS * STEP_S:.0f} s of compute; "
        f"trace: the owner returns after {RUN_BEFORE_OWNER_S} s of each run, "
        f"{EVICTIONS} times, for {OWNER_STAYS_S} s"
    )
    rows = []
    try:
        for name, script in (("with checkpoints", CHECKPOINTING), ("without", FROM_ZERO)):
            row = run(bridge, name, script)
            print(f"  {name}: {'; '.join(row['events'])}", flush=True)
            rows.append(row)
    finally:
        for path in OWNER_DIR.glob("*"):
            path.unlink(missing_ok=True)
    print()
    print(f"{'variant':<18} {'goodput':>8} {'compute s':>10} {'finish s':>9} {'runs':>5}")
    for row in rows:
        print(
            f"{row['name']:<18} {row['goodput']:>7.1%} {row['total']:>10.0f} "
            f"{row['finish']:>9.0f} {row['runs']:>5}"
        )


if __name__ == "__main__":
    main()
