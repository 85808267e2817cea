"""Flocking to a second pool: when every GPU of the home pool is taken back by its owner,
a GPU job's home schedd sends the job to another pool's central manager (FLOCK_TO), with an
IDTOKEN that pool issued (its own signing key: the home pool's tokens mean nothing there).
The job page, the usage records and the reports say which pool the job ran in, and actions
still reach the home schedd that holds the job.

The other pool is a copy of the personal pool's root on a port of its own, started by the
test and gone after it. It mounts the same job folders, as a department's cluster that
mounts the campus file system would."""

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from accounting.models import UsageRecord
from accounting.periods import period_last_days
from accounting.reports import report_scope, usage_by_group
from condor_bridge import BridgeError
from jobs.bridge import get_bridge
from jobs.models import FINAL_STATES, Job, JobState
from tests.helpers import CLEAN_ENV, POOL_ROOT, owners_present, wait_for
from tests.kits.integration import upload
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(600)]

POOL = str(Path(__file__).resolve().parents[2] / "deploy/personal-pool/pool")
WORKSTATIONS = ("ws-ampere", "ws-volta", "ws-fermi", "ws-office")
OTHER_PORT = "9818"
OTHER_MANAGER = f"127.0.0.1:{OTHER_PORT}"
WRITES_A_FILE = """
import os
os.makedirs("outputs", exist_ok=True)
with open("outputs/model.txt", "w") as f:
    f.write("trained elsewhere")
print("done", flush=True)
"""
SLEEPS = "import time\nprint('started', flush=True)\ntime.sleep(600)\n"


def pool(*args: str, env: dict | None = None) -> str:
    done = subprocess.run(
        [POOL, *args], capture_output=True, text=True, timeout=180, env=env, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def other_pool(tmp_path):
    """A second pool (collector, negotiator, schedd, four workstations) on its own port, and
    the home pool flocking to it; both undone afterwards."""
    root = Path(f"{POOL_ROOT}-flock")
    other = {
        **os.environ,
        "NIGHTSHIFT_POOL_ROOT": str(root),
        "NIGHTSHIFT_POOL_TEMPLATE": os.environ.get("NIGHTSHIFT_POOL_TEMPLATE", str(POOL_ROOT)),
        "NIGHTSHIFT_POOL_PORT": OTHER_PORT,
        # Its own portal token and tunnels: the home pool's stay as they are.
        "CONDOR_TOKEN_DIR": str(tmp_path / "other-tokens"),
        "NIGHTSHIFT_LIVE_TUNNEL_DIR": str(tmp_path / "other-tunnels"),
    }
    pool("start", env=other)
    token = tmp_path / "flock.token"
    token.write_text(pool("daemon-token", env=other))
    pool("flock-to", OTHER_MANAGER, str(token))
    try:
        yield root
    finally:
        # Nothing of this test runs on in either pool.
        for job in Job.objects.filter(cluster_id__isnull=False).exclude(state__in=FINAL_STATES):
            with contextlib.suppress(BridgeError):
                get_bridge(job.schedd).act("remove", job.cluster_id, job.proc_id, reason="test")
        pool("flock-to", "off")
        pool("stop", env=other)
        shutil.rmtree(root, ignore_errors=True)


def runs_in(root: Path, job: Job) -> bool:
    """Whether a workstation of the pool in `root` runs the job (its slot's GlobalJobId
    names the home schedd's cluster and proc)."""
    ads = subprocess.run(
        ["chroot", str(root), "condor_status", "-af", "GlobalJobId"],
        env=CLEAN_ENV,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return any(f"#{job.cluster_id}.{job.proc_id}#" in line for line in ads.splitlines())


def where_it_is(root: Path, job: Job) -> str:
    """What both pools say of the job, for a failure's message: the fixture's teardown removes
    the other pool's root, and its logs with it."""
    ad = get_bridge(job.schedd).job_ad(str(job.public_id)) or {}
    keys = ("ClusterId", "ProcId", "JobStatus", "RemoteHost", "RemotePool", "LastRemotePool")
    keys += ("NumShadowStarts", "NumJobStarts", "HoldReason", "LastRejMatchReason")
    keys += ("JobStartDate", "JobCurrentStartDate", "JobCurrentStartExecutingDate")
    keys += ("RemoteWallClockTime", "CompletionDate", "LastVacateTime", "LastRemoteHost")
    slots = subprocess.run(
        ["chroot", str(root), "condor_status", "-af", "Name", "State", "Activity", "GlobalJobId"],
        env=CLEAN_ENV,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    logs = [
        f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-25:])
        for path in [
            *sorted((root / "var/log/condor").glob("St*Log*")),
            Path(POOL_ROOT) / "var/log/condor/ShadowLog",
        ]
        if path.exists()
    ]
    return "\n".join(
        [
            f"home job ad: { {key: ad.get(key) for key in keys} }",
            f"the other pool's slots:\n{slots.stdout}{slots.stderr}",
            *logs,
        ]
    )


@pytest.fixture
def every_owner_back(desks):
    for workstation in WORKSTATIONS:
        desks.returns_to(workstation)
    wait_for(
        lambda: owners_present() == set(WORKSTATIONS),
        timeout=60,
        what="every home workstation's owner back",
    )


def test_a_job_the_home_pool_cannot_run_flocks_and_says_where_it_ran(
    web, live_pipeline, other_pool, every_owner_back
):
    job = upload(web, WRITES_A_FILE, name="flocked", gpus=1)
    wait_for_state(job, {JobState.COMPLETED, JobState.FAILED}, timeout=300)
    assert job.state == JobState.COMPLETED, list(job.events.values_list("kind", "detail"))
    assert job.pool == OTHER_MANAGER
    assert job.workstation in WORKSTATIONS
    response = web.get(reverse("jobs:output", args=[job.public_id, "outputs/model.txt"]))
    assert b"".join(response.streaming_content) == b"trained elsewhere"
    page = web.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert f"{job.workstation} (in the pool at {OTHER_MANAGER})" in page
    assert web.get(reverse("api:job-detail", args=[job.public_id])).json()["pool"] == OTHER_MANAGER

    # A usage record for each run HTCondor counts, the last saying which pool; the reports
    # count it, by pool too. (On a busy machine HTCondor may start a job twice.)
    wait_for(
        lambda: UsageRecord.objects.filter(job=job, ended_at__isnull=False).exists(),
        timeout=60,
        what="the run's usage record",
    )
    records = list(UsageRecord.objects.filter(job=job).order_by("started_at"))
    starts = (get_bridge(job.schedd).job_ad(str(job.public_id)) or {}).get("NumJobStarts")
    assert len(records) == starts, "\n".join(
        [
            *(
                f"{r.started_at} {r.ended_at} {r.wall_s} {r.ended_by} {r.pool} {r.workstation}"
                for r in records
            ),
            str(list(job.events.values_list("kind", "detail"))),
            where_it_is(other_pool, job),
        ]
    )
    assert (records[-1].pool, records[-1].workstation) == (OTHER_MANAGER, job.workstation)
    assert all(record.ended_at is not None for record in records)
    admin = get_user_model().objects.create_superuser("root-admin", password="x" * 20)
    table = usage_by_group(report_scope(admin), period_last_days(1), "pool")
    assert OTHER_MANAGER in [row[0] for row in table.cells()], table.cells()


def test_cancel_reaches_the_home_schedd_of_a_job_running_in_the_other_pool(
    web, live_pipeline, other_pool, every_owner_back
):
    job = upload(web, SLEEPS, name="flocked and cancelled", gpus=1)
    wait_for_state(job, {JobState.RUNNING}, timeout=300)
    wait_for(
        lambda: Job.objects.get(pk=job.pk).pool == OTHER_MANAGER,
        timeout=60,
        what="the running job's pool",
    )
    try:
        wait_for(
            lambda: runs_in(other_pool, job),
            timeout=60,
            what="a workstation of the other pool to run the job",
        )
    except AssertionError as error:  # seen once in CI, on a busy machine; not reproduced
        raise AssertionError(f"{error}\n{where_it_is(other_pool, job)}") from None

    assert web.post(reverse("jobs:cancel", args=[job.public_id])).status_code == 302
    wait_for_state(job, {JobState.REMOVED}, timeout=120)
    wait_for(
        lambda: not runs_in(other_pool, job),
        timeout=90,
        what="the other pool's workstation to let the job go",
    )
