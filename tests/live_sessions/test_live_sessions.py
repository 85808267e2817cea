"""Live sessions in a real Chromium, on the personal pool, with JupyterLab and TensorBoard
installed from the package index into the jobs' environments."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from environments.services import environment_create
from jobs.actions import job_cancel
from jobs.models import Job
from tests.helpers import OwnerAtDesk, owners_present, wait_for
from tests.kits.browser import sign_in

pytestmark = [pytest.mark.condor, pytest.mark.browser, pytest.mark.timeout(600)]

CELL = (
    'import os; open("from-the-notebook.txt", "w").write("saved in the session"); '
    'print("devices:", os.environ.get("CUDA_VISIBLE_DEVICES"))'
)
WRITES_SCALARS = """
import time
import nightshift
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

writer = EventFileWriter(nightshift.tensorboard_dir())
for step in range(600):
    value = Summary.Value(tag="train/loss", simple_value=1.0 / (step + 1))
    writer.add_event(Event(wall_time=time.time(), step=step, summary=Summary(value=[value])))
    writer.flush()
    time.sleep(1)
"""


@pytest.fixture
def desks():
    owner = OwnerAtDesk()
    yield owner
    owner.leave_all()
    wait_for(lambda: not owners_present(), timeout=60, what="owners gone from every desk")


@pytest.fixture
def grace(page, live_server, live_proxy):
    user = get_user_model().objects.create_user("grace", password="a-long-test-password")
    sign_in(page, live_server.url, "grace")
    return user


def test_a_notebook_session_runs_a_cell_on_the_gpu_and_ends_when_the_owner_returns(
    page, grace, desks, screenshot
):
    environment_create(user=grace, name="notebooks", requirements="jupyterlab")
    page.get_by_role("link", name="New notebook").click()
    page.get_by_label("Name").fill("try the data loader")
    page.get_by_label("Environment").select_option(label="notebooks (version 1) — yours")
    page.get_by_label("GPUs", exact=True).fill("1")
    page.get_by_label("CPUs").fill("1")
    page.get_by_label("Memory (GB)", exact=True).fill("1")
    page.get_by_label("Time limit (hours)").fill("1")
    screenshot("session-new")
    page.get_by_role("button", name="Start the session").click()

    page.get_by_role("heading", name="Live: try the data loader").wait_for()
    notebook = page.frame_locator("iframe[data-role=notebook]")
    # JupyterLab is installed on the workstation first (once), then starts.
    launcher = notebook.get_by_text("Python 3 (ipykernel)").first
    launcher.wait_for(timeout=300_000)
    job = Job.objects.get(name="try the data loader")
    assert page.locator("[data-role=time-left]").inner_text().endswith("left")
    launcher.click()
    # The new notebook's kernel starts, then its cell takes text (typed before it is ready,
    # text is lost).
    notebook.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=120_000)
    editor = notebook.locator(".jp-Notebook .jp-Cell .cm-content").first
    editor.click()
    editor.fill(CELL)
    assert "CUDA_VISIBLE_DEVICES" in editor.inner_text()
    editor.press("Shift+Enter")
    output = notebook.locator(".jp-OutputArea-output", has_text="devices:").first
    output.wait_for(timeout=120_000)
    devices = output.inner_text().split("devices:")[1].strip()
    assert devices and devices != "None", output.inner_text()
    page.keyboard.press("Control+s")
    screenshot("session-notebook")

    job.refresh_from_db()
    desks.returns_to(job.workstation)
    ended = page.locator("[data-role=session-ended]")
    ended.wait_for(timeout=120_000)
    assert f"The owner of {job.workstation} came back, so the session ended" in ended.inner_text()
    assert page.locator("iframe[data-role=notebook]").count() == 0
    screenshot("session-ended")
    page.get_by_role("link", name="try the data loader").click()
    page.get_by_role("link", name="outputs/from-the-notebook.txt").wait_for(timeout=60_000)


def test_a_new_students_first_notebook_starts_from_the_forms_defaults(
    page, grace, settings, screenshot
):
    # What make run does: the site's notebook environment (here with a smaller stack).
    settings.NOTEBOOK_REQUIREMENTS = "jupyterlab\nnumpy"
    call_command("notebook_environment")
    page.get_by_role("link", name="New notebook").click()
    assert page.get_by_label("Environment").input_value() == "Notebook@1"
    screenshot("session-defaults")
    page.get_by_role("button", name="Start the session").click()

    page.get_by_role("heading", name="Live: Notebook session").wait_for()
    notebook = page.frame_locator("iframe[data-role=notebook]")
    launcher = notebook.get_by_text("Python 3 (ipykernel)").first
    launcher.wait_for(timeout=300_000)
    launcher.click()
    notebook.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=120_000)
    editor = notebook.locator(".jp-Notebook .jp-Cell .cm-content").first
    editor.click()
    editor.fill("import numpy; print('sum:', numpy.arange(5).sum())")
    editor.press("Shift+Enter")
    notebook.locator(".jp-OutputArea-output", has_text="sum: 10").first.wait_for(timeout=120_000)
    screenshot("session-first-cell")
    job_cancel(job=Job.objects.get(name="Notebook session"), user=grace)


def test_tensorboard_draws_a_running_jobs_scalars_through_the_portal(
    page, grace, live_proxy, tmp_path, screenshot
):
    environment_create(user=grace, name="tb", requirements="tensorboard")
    script = tmp_path / "train.py"
    script.write_text(WRITES_SCALARS)
    page.get_by_role("link", name="New job").click()
    page.get_by_label("Job name").fill("watched")
    page.get_by_label("Training script or project").set_input_files(str(script))
    page.get_by_label("Software environment").select_option(label="tb (version 1) — yours")
    page.get_by_label("GPUs", exact=True).fill("0")
    page.get_by_label("TensorBoard, on the job's event files").check()
    page.get_by_role("button", name="Submit job").click()
    page.get_by_role("heading", name="watched").wait_for()
    page.locator("[data-role=state]", has_text="Running").wait_for(timeout=300_000)
    job = Job.objects.get(name="watched")

    page.get_by_role("link", name="Open TensorBoard").click()
    assert page.url.startswith(f"{live_proxy.url}/live/{job.public_id}/tensorboard/")
    # The job may still be installing or starting TensorBoard: the proxy's page retries.
    page.get_by_text("train/loss").first.wait_for(timeout=240_000)
    page.locator("scalar-card", has_text="train/loss").locator("canvas, svg").first.wait_for()
    screenshot("tensorboard")
    # Live: the job goes on writing, and what TensorBoard reads through the proxy grows.
    points = "() => fetch('data/plugin/scalars/scalars?run=.&tag=train%2Floss').then(r => r.json())"
    first = len(page.evaluate(points))
    wait_for(lambda: len(page.evaluate(points)) > first, timeout=60, what="new scalars")
    job_cancel(job=job, user=grace)
