"""On the personal pool, a job's checkpoints are timed by the workstation it lands on: the
kit's cron job publishes the portal's figures for that workstation in its machine ad, and
the job helper, reading them from the ad HTCondor gives the job, plans its saves with them."""

import json
import uuid

import pytest
from django.conf import settings
from django.utils import timezone

from condor_bridge import FileMode, JobRequest, JobState
from condor_bridge.schedd import HTCondorBridge
from forecasts.model.availability import QUARTERS_PER_WEEK
from forecasts.model.checkpoints import daly_interval_s, figures_for_row
from forecasts.models import WorkstationForecast
from tests.helpers import POOL_ROOT, make_job_dir, pool_command, wait_for
from tests.lending.test_lending_real_pool import kit_reads_the_portal, published  # noqa: F401

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]

# Free now, surely for two hours, likely back within four: an office in the morning.
ROW = [1.0, 0.2, 0.1, 0.05, 0.02]
PLANS = """
import json, os, time
import nightshift

nightshift.should_checkpoint()
print(open(os.path.join(os.environ["NIGHTSHIFT_HELPER_DIR"], "checkpoint-plan.json")).read())
"""


GPU_WORKSTATIONS = ("ws-ampere", "ws-fermi", "ws-volta")


@pytest.fixture
def forecasts(kit_reads_the_portal):  # noqa: F811
    """Every GPU workstation's forecast, seen by its kit; gone again afterwards, from the
    portal, the kit's cache and the machine ads, so that no later job plans with it."""
    yield
    WorkstationForecast.objects.all().delete()
    for name in GPU_WORKSTATIONS:
        (POOL_ROOT / f"var/spool/condor/nightshift-placement-{name}.json").unlink(missing_ok=True)
    for attribute in ("NightshiftMeanFreeS", "NightshiftStayFree2h"):
        wait_for(
            lambda attribute=attribute: set(published(attribute).values()) == {"undefined"},
            timeout=60,
            what=f"every workstation to stop publishing {attribute}",
        )


def test_a_job_plans_its_saves_with_the_figures_its_workstation_publishes(forecasts):
    for name in GPU_WORKSTATIONS:
        WorkstationForecast.objects.create(
            workstation=name,
            fitted_at=timezone.now(),
            observed_days=21,
            stay_free=[ROW] * QUARTERS_PER_WEEK,
            confidence=["high"] * QUARTERS_PER_WEEK,
        )
    mean_s, possible_s = figures_for_row((2, 4, 8, 16, 24), ROW)
    try:
        wait_for(
            lambda: set(published("NightshiftMeanFreeS").values()) == {str(mean_s)},
            timeout=60,
            what="every GPU workstation to publish its figures",
        )
    except AssertionError as exc:
        # Seen once in CI (2026-12-06) and not locally: say what each workstation published.
        states = pool_command("condor_status", "-af", "Name", "State", "NightshiftMeanFreeS")
        raise AssertionError(f"{exc}; expected {mean_s}, the pool says:\n{states.stdout}") from None
    bridge = HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SHARED,
        instance=f"timing-{uuid.uuid4().hex[:10]}",
    )
    job_id, folder = make_job_dir(settings.JOBS_DIR, PLANS, uid=settings.JOB_DIR_UID)
    request = JobRequest(
        job_id=job_id,
        job_dir=str(folder),
        script_name="train.py",
        memory_mb=128,
        gpus=1,
        checkpoint_interval_s=3600,
    )
    bridge.submit(request)
    done = wait_for(
        lambda: (job := bridge.find(job_id)) and job.state is JobState.COMPLETED and job,
        timeout=180,
        what="the job to plan and end",
    )
    assert done.exit_code == 0, (folder / "stderr.txt").read_text()
    plan = json.loads((folder / "stdout.txt").read_text())
    assert plan["interval_s"] == round(daly_interval_s(60, mean_s))  # not the hour it was given
    started = done.started_at.timestamp()
    assert abs(plan["save_at"] - (started + possible_s - 120)) < 120
