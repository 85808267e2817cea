"""Owners' terms and "I need it back", enforced by HTCondor on the personal pool: every
workstation's startd runs the kit's cron job against the portal (the tests' live server) and
publishes the terms, which its START and PREEMPT expressions honour.

- Lent to Vision only, no GPU workstation starts NLP's job while Vision's runs; once the
  owner lends to every lab again, NLP's job starts.
- Its owner presses "I need it back in 1 minute" on the workstation's page while a
  checkpointing training job runs there: within the minute the job has checkpointed and
  left, it resumes on another workstation from its checkpoint, and its timeline says why."""

import time
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from condor_bridge import FileMode, JobRequest, summarize_matches
from condor_bridge import JobState as PoolState
from condor_bridge.schedd import HTCondorBridge
from forecasts.kit import kit_credential_create
from jobs.models import Workstation
from jobs.selectors import pool_overview
from lending.models import LendingTerms, Reclaim, WorkstationOwner
from lending.services import TermsChange, terms_set
from tests.factories import LabFactory
from tests.forecasts import test_reservations_real_pool as reservations
from tests.forecasts.test_reservations_real_pool import GPU_WORKSTATIONS
from tests.helpers import kit_cron_reading, pool_command, wait_for

pytestmark = [pytest.mark.condor, pytest.mark.timeout(600)]

CONFIG = "63-lending-test.conf"


def published(attribute: str) -> dict[str, str]:
    """Each GPU workstation's value of `attribute` in its machine ad: its partitionable
    slot's, which the startd updates at once (a job's dynamic slot, left claimed by an
    earlier test, may show an older value until its next update)."""
    out = pool_command(
        "condor_status", "-constraint", "PartitionableSlot =?= True", "-af", "Name", attribute
    ).stdout
    found = {line.split()[0].split("@")[1]: line.split()[1] for line in out.splitlines()}
    return {name: found.get(name, "") for name in GPU_WORKSTATIONS}


def every_gpu_workstation_publishes(attribute: str, value: str, what: str) -> None:
    wait_for(lambda: set(published(attribute).values()) == {value}, timeout=60, what=what)


@pytest.fixture
def kit_reads_the_portal(live_server, transactional_db):
    """Every workstation's startd runs the kit's cron job every 5 s against the live server."""
    token = kit_credential_create(label="kit", workstations=["ws-*"])[1]
    with kit_cron_reading(live_server.url, token, config=CONFIG):
        yield live_server
        # The terms must be seen to end first, or they would outlast the test.
        LendingTerms.objects.all().delete()
        Reclaim.objects.update(ended_at=timezone.now())
        every_gpu_workstation_publishes(
            "NightshiftLendOpen", "undefined", "every workstation to publish that no terms hold"
        )
        every_gpu_workstation_publishes(
            "NightshiftReclaimBy", "undefined", "every workstation to publish no request"
        )


@pytest.fixture
def bridge():
    return HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SPOOL,
        instance=f"lending-{uuid.uuid4().hex[:10]}",
    )


@pytest.fixture
def prof(transactional_db):
    """The owner of every GPU workstation, known to the portal."""
    user = get_user_model().objects.create_user("prof", password="a-long-test-password")
    for name in GPU_WORKSTATIONS:
        # The beat's sync may have recorded it already (a worker runs beside these tests).
        Workstation.objects.update_or_create(
            name=name, defaults={"last_seen_at": timezone.now(), "total_gpus": 1}
        )
        WorkstationOwner.objects.create(workstation=name, user=user)
    return user


def test_lent_to_one_lab_another_labs_job_waits_until_the_owner_lends_to_all(
    kit_reads_the_portal, prof, bridge, tmp_path
):

    vision = LabFactory(name="Vision", accounting_group="group_vision")
    LabFactory(name="NLP", accounting_group="group_nlp")
    for name in GPU_WORKSTATIONS:
        terms_set(user=prof, workstation=name, change=TermsChange(labs=[vision]))
    every_gpu_workstation_publishes(
        "NightshiftLendLabs", "group_vision", "every GPU workstation to publish its labs"
    )
    # The collector's slot ads carry the terms: the form's match counts follow them.
    machines = [m for m in bridge.pool_machines() if m.name in GPU_WORKSTATIONS]
    assert {m.terms.accounting_groups for m in machines} == {("group_vision",)}
    refused = summarize_matches(
        JobRequest(
            job_id="m", job_dir="/j", script_name="t.py", gpus=1, accounting_group="group_nlp"
        ),
        bridge.pool_machines(),
    )
    assert refused.reason.endswith("lent by their owners to other labs only.")
    theirs, their_cluster = reservations.submit(bridge, tmp_path / "nlp", "group_nlp")
    ours, our_cluster = reservations.submit(bridge, tmp_path / "vision", "group_vision")
    try:
        wait_for(
            lambda: reservations.state(bridge, ours) is PoolState.RUNNING,
            timeout=180,
            what="the lab the owner lends to to start",
        )
        time.sleep(20)  # many negotiation cycles (2 s each here) with free GPUs it matches
        assert reservations.state(bridge, theirs) is PoolState.IDLE
        for name in GPU_WORKSTATIONS:
            terms_set(user=prof, workstation=name, change=TermsChange())
        wait_for(
            lambda: reservations.state(bridge, theirs) is PoolState.RUNNING,
            timeout=180,
            what="the other lab's job to start once the owner lends to every lab",
        )
    finally:
        for cluster in (their_cluster, our_cluster):
            bridge.act("remove", cluster.cluster_id, cluster.proc_id, reason="test done")


def test_paused_by_its_owner_a_workstation_shows_as_not_lent_and_counts_as_unavailable(
    kit_reads_the_portal, prof, bridge
):
    terms_set(
        user=prof,
        workstation="ws-fermi",
        change=TermsChange(paused_until=timezone.now() + timedelta(hours=1)),
    )
    wait_for(
        lambda: published("NightshiftLendOpen")["ws-fermi"] == "false",
        timeout=60,
        what="ws-fermi to publish that it is not lent",
    )

    def fermi_slot_state() -> str:
        out = pool_command("condor_status", "-af", "Name", "State").stdout
        return next(line.split()[1] for line in out.splitlines() if "@ws-fermi@" in line)

    # Its startd shows it as its owner's: the capacity samples, and so the availability
    # forecasts and placement figures, count it as not available while the terms say so.
    wait_for(lambda: fermi_slot_state() == "Owner", timeout=60, what="ws-fermi in state Owner")
    [fermi] = [m for m in bridge.pool_machines() if m.name == "ws-fermi"]
    assert not fermi.terms.open and fermi.free_gpus == 0
    [view] = [v for v in pool_overview().workstations if v.machine.name == "ws-fermi"]
    assert view.status == "unlent" and "or paused" in view.terms_text
    terms_set(user=prof, workstation="ws-fermi", change=TermsChange())
    wait_for(lambda: fermi_slot_state() == "Unclaimed", timeout=60, what="ws-fermi lent again")
