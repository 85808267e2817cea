"""A student in a real Chromium: log in, upload a script, watch it run, download its output."""

import os

import pytest
from django.contrib.auth import get_user_model

pytestmark = [pytest.mark.condor, pytest.mark.browser, pytest.mark.timeout(300)]

# The async-unsafe check trips on Playwright's event loop in this thread; the ORM calls
# here are ordinary synchronous test setup.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

SCRIPT = """
import time
for epoch in range(3):
    print(f"epoch {epoch} loss {1.0 / (epoch + 1):.3f}", flush=True)
    time.sleep(1)
open("outputs/model.txt", "w").write("trained")
"""


def test_a_student_uploads_a_script_watches_it_and_downloads_the_output(
    page, live_server, live_pipeline, tmp_path
):
    get_user_model().objects.create_user("grace", password="a-long-test-password")
    page.goto(f"{live_server.url}/")
    page.get_by_label("Username").fill("grace")
    page.get_by_label("Password").fill("a-long-test-password")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("link", name="New job").click()

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    page.get_by_label("Name").fill("my first job")
    page.get_by_label("Training script").set_input_files(str(script))
    page.get_by_label("GPUs").fill("1")
    page.get_by_label("Minimum GPU memory (GB)").fill("10")
    page.get_by_label("Arguments").fill("--epochs=3")
    page.get_by_role("button", name="Submit job").click()

    page.get_by_role("heading", name="my first job").wait_for()
    state = page.locator("[data-role=state]")
    state.filter(has_text="Completed").wait_for(timeout=150_000)
    assert "epoch 2 loss 0.333" in page.locator("[data-role=stdout]").inner_text()
    assert page.locator("[data-role=workstation]").inner_text() in ("ws-ampere", "ws-volta")
    page.screenshot(path=str(tmp_path / "job.png"), full_page=True)

    link = page.get_by_role("link", name="model.txt")
    link.wait_for(timeout=60_000)
    with page.expect_download() as download:
        link.click()
    assert download.value.path().read_text() == "trained"

    page.get_by_role("link", name="My jobs").click()
    assert page.get_by_role("link", name="my first job").is_visible()
