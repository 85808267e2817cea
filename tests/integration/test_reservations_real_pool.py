"""A reservation on the personal pool, enforced by HTCondor: every GPU workstation's startd
runs the kit's cron job against the portal (the tests' live server), publishes the window,
and its START expression keeps another lab's job off the reserved GPUs while the lab's own
job runs. Once the reservation is cancelled, the other lab's job starts."""

import time
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.utils import timezone

from accounts import services as account_services
from condor_bridge import FileMode, JobRequest, JobState
from condor_bridge.schedd import HTCondorBridge
from forecasts.reservations import ReservationRequest, reservation_cancel, reservation_create
from jobs.models import Workstation
from tests.factories import LabFactory, MembershipFactory, UserFactory
from tests.helpers import POOL_ROOT, copy_job_helpers, pool_command, pool_config, wait_for

pytestmark = [pytest.mark.condor, pytest.mark.timeout(600)]

CONFIG = "62-reservations-test.conf"
TOKEN_IN_ROOT = "etc/condor/nightshift-kit-test.token"
GPU_WORKSTATIONS = ("ws-ampere", "ws-fermi", "ws-volta")


def reserved_for() -> dict[str, str]:
    out = pool_command("condor_status", "-af", "Name", "NightshiftReservedFor").stdout
    return {line.split()[0].split("@")[1]: line.split()[1] for line in out.splitlines()}


@pytest.fixture
def kit_reads_the_portal(live_server, transactional_db):
    """Every workstation's startd runs the kit's cron job every 5 s against the live server."""
    account = UserFactory(username="workstations")
    account.user_permissions.add(Permission.objects.get(codename="view_workstationforecast"))
    token = POOL_ROOT / TOKEN_IN_ROOT
    token.write_text(account_services.token_create(user=account, name="kit").secret + "\n")
    token.chmod(0o644)  # a test token; the kit's own is readable by the condor account only
    pool_config(
        f"NIGHTSHIFT_PORTAL_URL = {live_server.url}\n"
        f"NIGHTSHIFT_PORTAL_TOKEN_FILE = /{TOKEN_IN_ROOT}\n"
        "STARTD_CRON_JOBLIST = $(STARTD_CRON_JOBLIST) PLACEMENT\n"
        "VOLTA.STARTD_CRON_JOBLIST = OWNERGPU PLACEMENT\n"
        "STARTD_CRON_PLACEMENT_PERIOD = 5s\n",
        name=CONFIG,
    )  # fmt: skip
    yield
    pool_config(None, name=CONFIG)
    token.unlink(missing_ok=True)


@pytest.fixture
def bridge():
    return HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR, token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SPOOL, instance=f"reservations-{uuid.uuid4().hex[:10]}",
    )  # fmt: skip


def submit(bridge, folder, group: str) -> tuple[str, object]:
    folder.mkdir()
    (folder / "outputs").mkdir()
    copy_job_helpers(folder)
    (folder / "train.py").write_text("import time\ntime.sleep(600)\n")
    request = JobRequest(job_id=str(uuid.uuid4()), job_dir=str(folder), script_name="train.py",
                         memory_mb=256, gpus=1, accounting_group=group)  # fmt: skip
    return request.job_id, bridge.submit(request)


def state(bridge, job_id: str) -> JobState | None:
    job = bridge.find(job_id)
    return job.state if job else None


def test_a_reservation_keeps_another_labs_job_off_until_it_is_cancelled(
    kit_reads_the_portal, bridge, tmp_path, pool_is_up
):
    vision = LabFactory(name="Vision", accounting_group="group_vision")
    LabFactory(name="NLP", accounting_group="group_nlp")
    lead = MembershipFactory(lab=vision, role="lead").user
    for name in GPU_WORKSTATIONS:
        Workstation.objects.create(name=name, last_seen_at=timezone.now(), total_gpus=1)
    now = timezone.now()
    reservation = reservation_create(actor=lead, asked=ReservationRequest(
        lab=vision, purpose="Demo", starts_at=now, ends_at=now + timedelta(hours=1),
        workstations=GPU_WORKSTATIONS,
    ))  # fmt: skip
    wait_for(lambda: all(reserved_for().get(n) == "group_vision" for n in GPU_WORKSTATIONS),
             timeout=120, what="every GPU workstation to publish the reservation")  # fmt: skip
    assert reserved_for()["ws-office"] == "undefined"

    theirs, their_cluster = submit(bridge, tmp_path / "nlp", "group_nlp")
    ours, our_cluster = submit(bridge, tmp_path / "vision", "group_vision")
    try:
        wait_for(lambda: state(bridge, ours) is JobState.RUNNING, timeout=180,
                 what="the lab's own job to start on a reserved workstation")  # fmt: skip
        # Many negotiation cycles (2 s each here) with a free GPU the other lab's job matches.
        time.sleep(20)
        assert state(bridge, theirs) is JobState.IDLE

        reservation_cancel(actor=lead, reservation=reservation)
        wait_for(lambda: state(bridge, theirs) is JobState.RUNNING, timeout=180,
                 what="the other lab's job to start once the reservation is cancelled")  # fmt: skip
    finally:
        for cluster in (their_cluster, our_cluster):
            bridge.act("remove", cluster.cluster_id, cluster.proc_id, reason="test done")
