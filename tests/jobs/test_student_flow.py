"""A student in a real Chromium against the real pool, from login to download."""

import pytest

from tests.kits.browser import submit_job

pytestmark = [pytest.mark.condor, pytest.mark.browser, pytest.mark.timeout(300)]

TRAINING = """
import time
import nightshift
for epoch in range(4):
    loss = 1.0 / (epoch + 1)
    print(f"epoch {epoch} loss {loss:.3f}", flush=True)
    nightshift.log(step=epoch, loss=loss, accuracy=0.5 + epoch / 10)
    time.sleep(1)
open("outputs/model.txt", "w").write("trained")
"""
SLEEPER = "import time\nprint('working', flush=True)\ntime.sleep(600)\n"


def test_a_student_uploads_a_script_watches_it_and_downloads_the_output(
    logged_in, screenshot, tmp_path
):
    page = logged_in
    submit_job(
        page,
        tmp_path,
        TRAINING,
        name="my first job",
        GPUs=1,
        **{"Minimum GPU memory (GB)": 10, "Arguments": "--epochs=4"},
    )
    page.locator("[data-role=match].ok", has_text="2 of 4 workstations (3 GPUs) match").wait_for()
    screenshot("new-job-form")
    page.get_by_role("button", name="Submit job").click()

    page.get_by_role("heading", name="my first job").wait_for()
    page.locator("[data-role=state]", has_text="Completed").wait_for(timeout=150_000)
    assert "epoch 3 loss 0.250" in page.locator("[data-role=stdout]").inner_text()
    assert page.locator("[data-role=workstation]").inner_text() in ("ws-ampere", "ws-volta")
    page.locator("figure[data-metric=loss] svg path").wait_for()
    # The charts refresh every few seconds, independently of the state shown above them.
    caption = page.locator("figure[data-metric=accuracy] figcaption")
    caption.filter(has_text="accuracy (last: 0.8)").wait_for(timeout=15_000)
    link = page.get_by_role("link", name="outputs/model.txt")
    link.wait_for(timeout=60_000)
    screenshot("job-completed-with-metrics")
    with page.expect_download() as download:
        link.click()
    assert download.value.path().read_text() == "trained"

    page.get_by_role("link", name="My jobs").click()
    assert page.get_by_role("link", name="my first job").is_visible()
    screenshot("my-jobs")
    page.get_by_role("link", name="Pool").click()
    page.locator("tr[data-workstation=ws-volta]").wait_for()
    screenshot("pool")


def test_an_impossible_request_is_refused_with_its_reason(logged_in, screenshot, tmp_path):
    page = logged_in
    submit_job(
        page,
        tmp_path,
        "print('never')\n",
        name="too big",
        GPUs=1,
        **{"Minimum GPU memory (GB)": 200},
    )
    page.locator("[data-role=match].none").wait_for()
    assert (
        "the largest GPU in the pool has 46.5 GB" in page.locator("[data-role=match]").inner_text()
    )
    page.get_by_role("button", name="Submit job").click()
    error = page.locator(".has-error .error")
    error.wait_for()
    assert "the largest GPU in the pool has 46.5 GB" in error.inner_text()
    assert page.get_by_label("Job name").input_value() == "too big"
    screenshot("impossible-request-refused")


def test_a_student_cancels_a_running_job_and_clones_it(logged_in, screenshot, tmp_path):
    page = logged_in
    submit_job(page, tmp_path, SLEEPER, name="long run", GPUs=0, Arguments="--seed=7")
    page.get_by_role("button", name="Submit job").click()
    page.locator("[data-role=state]", has_text="Running").wait_for(timeout=120_000)
    page.get_by_role("button", name="Cancel job").click()
    page.locator("[data-role=state]", has_text="Removed").wait_for(timeout=60_000)
    assert "cancel requested" in page.locator("[data-role=events]").inner_text()
    screenshot("job-cancelled")

    page.get_by_role("link", name="Clone…").click()
    page.locator("[data-role=clone-note]").wait_for()
    assert page.get_by_label("Job name").input_value() == "long run"
    assert page.get_by_label("Arguments").input_value() == "--seed=7"
    page.get_by_label("Job name").fill("long run, cloned")
    screenshot("clone-form")
    page.get_by_role("button", name="Submit job").click()
    page.get_by_role("heading", name="long run, cloned").wait_for()
    assert "Copied train.py" in page.locator("[data-role=events]").inner_text()
    page.get_by_role("button", name="Cancel job").click()
    page.locator("[data-role=state]", has_text="Removed").wait_for(timeout=60_000)


def test_a_held_job_is_explained_and_can_be_released(logged_in, screenshot, tmp_path):
    page = logged_in
    submit_job(page, tmp_path, SLEEPER, name="too slow", GPUs=0, **{"Maximum runtime (minutes)": 1})
    page.get_by_role("button", name="Submit job").click()
    page.locator("[data-role=state]", has_text="Held").wait_for(timeout=180_000)
    hold = page.locator("[data-role=hold]")
    assert "It ran longer than its maximum runtime." in hold.inner_text()
    assert "Raise the maximum runtime" in hold.inner_text()
    screenshot("job-held-explained")
    page.get_by_role("button", name="Release").click()
    page.locator("[data-role=state]", has_text="Idle").or_(
        page.locator("[data-role=state]", has_text="Running")
    ).wait_for(timeout=60_000)
    page.get_by_role("button", name="Cancel job").click()
    page.locator("[data-role=state]", has_text="Removed").wait_for(timeout=60_000)


def test_a_student_uploads_a_project_archive_with_requirements(logged_in, screenshot, tmp_path):
    from tests.projects import project_with_requirements

    page = logged_in
    archive = tmp_path / "project.zip"
    archive.write_bytes(project_with_requirements())
    page.get_by_role("link", name="New job").click()
    page.get_by_label("Job name").fill("a project")
    page.get_by_label("Training script or project").set_input_files(str(archive))
    page.get_by_label("Entry command").fill("python src/train.py --epochs 1")
    page.get_by_label("GPUs").fill("0")
    page.get_by_role("button", name="Submit job").click()
    page.get_by_role("heading", name="a project").wait_for()
    page.locator("[data-role=state]", has_text="Completed").wait_for(timeout=180_000)
    page.locator("[data-role=install]", has_text="environment requirements-").wait_for()
    assert 'hello from epochs = "1"' in page.locator("[data-role=stdout]").inner_text()
    screenshot("project-with-requirements")
