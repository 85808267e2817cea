"""A reservation on the personal pool, enforced by HTCondor: every GPU workstation's startd
runs the kit's cron job against the portal (the tests' live server), publishes the window,
and its START expression keeps another lab's job off the reserved GPUs while the lab's own
job runs. Once the reservation is cancelled, the other lab's job starts. When a window opens
on GPUs another lab's jobs hold, RANK lets the negotiator take one back for the lab's job."""

import time
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from condor_bridge import FileMode, JobRequest, JobState
from condor_bridge.schedd import HTCondorBridge
from forecasts.kit import kit_credential_create
from forecasts.models import Reservation
from forecasts.reservations import ReservationRequest, reservation_cancel, reservation_create
from jobs.models import Workstation
from tests.factories import LabFactory, MembershipFactory
from tests.helpers import copy_job_helpers, kit_cron_reading, pool_command, wait_for

pytestmark = [pytest.mark.condor, pytest.mark.timeout(600)]

CONFIG = "62-reservations-test.conf"
GPU_WORKSTATIONS = ("ws-ampere", "ws-fermi", "ws-volta")


def reserved_from() -> dict[str, int]:
    """NightshiftReservedFrom of each GPU workstation that publishes one."""
    out = pool_command("condor_status", "-af", "Name", "NightshiftReservedFrom").stdout
    found = {line.split()[0].split("@")[1]: line.split()[1] for line in out.splitlines()}
    return {name: int(found[name]) for name in GPU_WORKSTATIONS if found.get(name, "").isdigit()}


def reserved_for() -> dict[str, str]:
    out = pool_command("condor_status", "-af", "Name", "NightshiftReservedFor").stdout
    return {line.split()[0].split("@")[1]: line.split()[1] for line in out.splitlines()}


@pytest.fixture
def kit_reads_the_portal(live_server, transactional_db):
    """Every workstation's startd runs the kit's cron job every 5 s against the live server."""
    token = kit_credential_create(label="kit", workstations=["ws-*"])[1]
    with kit_cron_reading(live_server.url, token, config=CONFIG):
        yield
        # The windows must be seen to end first, or the reservation would outlast the test.
        Reservation.objects.update(cancelled_at=timezone.now())
        publish_on_every_gpu_workstation(
            "undefined", timeout=60, what="every workstation to publish that nothing is reserved"
        )


@pytest.fixture
def vision_lead(transactional_db):
    """Vision (whose lead reserves), NLP, and the portal knowing the GPU workstations."""
    vision = LabFactory(name="Vision", accounting_group="group_vision")
    LabFactory(name="NLP", accounting_group="group_nlp")
    for name in GPU_WORKSTATIONS:
        # The beat's sync may have recorded it already (a worker runs beside these tests).
        Workstation.objects.update_or_create(
            name=name, defaults={"last_seen_at": timezone.now(), "total_gpus": 1}
        )
    return vision, MembershipFactory(lab=vision, role="lead").user


def publish_on_every_gpu_workstation(group: str, *, timeout: float, what: str) -> None:
    wait_for(
        lambda: all(reserved_for().get(n) == group for n in GPU_WORKSTATIONS),
        timeout=timeout,
        what=what,
    )


@pytest.fixture
def bridge():
    return HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SPOOL,
        instance=f"reservations-{uuid.uuid4().hex[:10]}",
    )


def submit(bridge, folder, group: str) -> tuple[str, object]:
    folder.mkdir(parents=True)
    (folder / "outputs").mkdir()
    copy_job_helpers(folder)
    (folder / "train.py").write_text("import time\ntime.sleep(600)\n")
    request = JobRequest(
        job_id=str(uuid.uuid4()),
        job_dir=str(folder),
        script_name="train.py",
        memory_mb=256,
        gpus=1,
        accounting_group=group,
    )
    return request.job_id, bridge.submit(request)


def state(bridge, job_id: str) -> JobState | None:
    job = bridge.find(job_id)
    return job.state if job else None


def test_a_reservation_keeps_another_labs_job_off_until_it_is_cancelled(
    kit_reads_the_portal, bridge, tmp_path, pool_is_up, vision_lead
):
    vision, lead = vision_lead
    now = timezone.now()
    reservation = reservation_create(
        actor=lead,
        asked=ReservationRequest(
            lab=vision,
            purpose="Demo",
            starts_at=now,
            ends_at=now + timedelta(hours=1),
            workstations=GPU_WORKSTATIONS,
        ),
    )
    publish_on_every_gpu_workstation(
        "group_vision", timeout=120, what="every GPU workstation to publish the reservation"
    )
    assert reserved_for()["ws-office"] == "undefined"

    theirs, their_cluster = submit(bridge, tmp_path / "nlp", "group_nlp")
    ours, our_cluster = submit(bridge, tmp_path / "vision", "group_vision")
    try:
        wait_for(
            lambda: state(bridge, ours) is JobState.RUNNING,
            timeout=180,
            what="the lab's own job to start on a reserved workstation",
        )
        # Many negotiation cycles (2 s each here) with a free GPU the other lab's job matches.
        time.sleep(20)
        assert state(bridge, theirs) is JobState.IDLE

        reservation_cancel(actor=lead, reservation=reservation)
        wait_for(
            lambda: state(bridge, theirs) is JobState.RUNNING,
            timeout=180,
            what="the other lab's job to start once the reservation is cancelled",
        )
    finally:
        for cluster in (their_cluster, our_cluster):
            bridge.act("remove", cluster.cluster_id, cluster.proc_id, reason="test done")


def test_when_a_window_opens_the_lab_takes_a_gpu_back_from_another_labs_running_job(
    kit_reads_the_portal, bridge, tmp_path, pool_is_up, vision_lead
):
    vision, lead = vision_lead
    later = timezone.now() + timedelta(minutes=30)
    reservation = reservation_create(
        actor=lead,
        asked=ReservationRequest(
            lab=vision,
            purpose="Demo",
            starts_at=later,
            ends_at=later + timedelta(hours=1),
            workstations=GPU_WORKSTATIONS,
        ),
    )
    publish_on_every_gpu_workstation(
        "group_vision", timeout=50, what="every GPU workstation to publish the window ahead"
    )
    theirs = [submit(bridge, tmp_path / f"nlp-{n}", "group_nlp") for n in range(4)]
    clusters = [cluster for _, cluster in theirs]
    try:
        # The window changes nothing until it opens: NLP's four jobs take all four GPUs
        # (ws-volta has two), and Vision's waits through five negotiation cycles.
        wait_for(
            lambda: all(state(bridge, job) is JobState.RUNNING for job, _ in theirs),
            timeout=90,
            what="the other lab's jobs to take every GPU first",
        )
        ours, our_cluster = submit(bridge, tmp_path / "vision", "group_vision")
        clusters.append(our_cluster)
        time.sleep(10)
        assert state(bridge, ours) is JobState.IDLE
        # Rather than wait half an hour, the window is brought forward to open in 5 s.
        opens = timezone.now() + timedelta(seconds=5)
        Reservation.objects.filter(pk=reservation.pk).update(starts_at=opens)
        wait_for(
            lambda: set(reserved_from().values()) == {int(opens.timestamp())},
            timeout=60,
            what="the workstations to publish the window's new start",
        )

        wait_for(
            lambda: state(bridge, ours) is JobState.RUNNING,
            timeout=120,
            what="the lab's job to take a GPU back once its window opens",
        )
        states = [state(bridge, job) for job, _ in theirs]
        assert states.count(JobState.RUNNING) == 3
        # The evicted job waits; START keeps it off the reserved GPUs until the window ends.
        assert states.count(JobState.IDLE) == 1
    finally:
        for cluster in clusters:
            bridge.act("remove", cluster.cluster_id, cluster.proc_id, reason="test done")
