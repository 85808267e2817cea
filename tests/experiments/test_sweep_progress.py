"""A large sweep's page, opened while the worker writes its runs: it shows how far the
worker has got without being reloaded (writing the runs, then filling their folders), and
reloads itself once HTCondor may start every run."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from experiments import plans, preparation, sweeps
from experiments.models import Sweep
from jobs import specs
from tests.conftest import script_upload
from tests.kits.browser import sign_in

pytestmark = pytest.mark.browser


def test_the_sweep_page_follows_the_worker_and_reloads_when_htcondor_has_the_runs(
    page, live_server, fake_bridge, settings, monkeypatch
):
    settings.SWEEP_RUNS_IN_REQUEST = 4
    monkeypatch.setattr(preparation, "PREPARE_CHUNK", 6)
    # No worker here: the test plays its part, step by step.
    monkeypatch.setattr("experiments.sweeps.sweep_enqueue_submit", lambda pk: None)
    student = get_user_model().objects.create_user("grace", password="a-long-test-password")
    sweep = sweeps.sweep_submit(
        user=student,
        spec=specs.JobSpec(name="wide grid", arguments=["--lr", "{lr}"]),
        plan=plans.SweepPlan.from_json({"grid": {"lr": list(range(12))}}),
        script=script_upload(),
    )
    sign_in(page, live_server.url, "grace")
    page.goto(live_server.url + reverse("jobs:sweep", args=[sweep.public_id]))
    stage = page.locator("[data-role=sweep-stage]")
    assert "Writing its runs: 0 of 12" in stage.inner_text()
    assert page.locator("progress").get_attribute("value") == "0"

    preparation.write_chunk(
        sweep, preparation.Preparation.from_json(sweep.preparation), range(0, 6)
    )
    page.get_by_text("Writing its runs: 6 of 12").wait_for()
    assert page.locator("progress").get_attribute("value") == "6"
    preparation.sweep_prepare(sweep.pk)
    page.get_by_text("Its runs are written; handing them to HTCondor").wait_for()
    # HTCondor takes the runs with their folders empty; they wait there until filled.
    monkeypatch.setattr(sweeps, "sweep_fill_folders", lambda pk: Sweep.objects.get(pk=pk))
    sweeps.sweep_submit_to_pool(sweep.pk)
    page.get_by_text("Making their folders: 0 of 12").wait_for()
    assert page.locator("progress").get_attribute("max") == "12"
    preparation.sweep_fill_folders(sweep.pk)
    # The page reloads itself: the runs table and the cluster come with it.
    page.get_by_text("HTCondor cluster 1").wait_for()
    assert page.locator("[data-role=sweep-progress]").count() == 0
    assert page.locator("[data-role=runs] tbody tr[data-job]").count() == 12
