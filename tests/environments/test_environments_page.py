"""In Chromium: a student makes an environment, reads its lock, test-builds it on the
personal pool, and runs a job with it from the job form."""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.condor, pytest.mark.timeout(400)]


def test_a_student_makes_an_environment_builds_it_and_runs_a_job_with_it(
    logged_in, screenshot, tmp_path
):
    page = logged_in
    page.get_by_role("link", name="Environments").click()
    page.get_by_role("heading", name="Software environments").wait_for()
    page.get_by_role("link", name="New environment").click()
    page.get_by_label("Name", exact=True).fill("toml-tools")
    page.get_by_label("Description").fill("Writes TOML")
    page.get_by_label("Packages").fill("tomli-w==1.2.0\n")
    page.get_by_role("button", name="Create and lock").click()
    page.get_by_role("heading", name="toml-tools").wait_for()
    page.get_by_text("The lock: exact versions and hashes").click()
    assert "--hash=sha256:" in page.locator("[data-role=lock]").inner_text()
    screenshot("environment-detail")

    page.get_by_role("button", name="Test-build version 1").click()
    page.get_by_role("heading", name="Test build of toml-tools@1").wait_for()
    page.locator("[data-role=state]", has_text="Completed").wait_for(timeout=240_000)
    assert "test build passed" in page.locator("[data-role=stdout]").inner_text()

    path = tmp_path / "train.py"
    path.write_text("import tomli_w\nprint(tomli_w.dumps({'ok': True}))\n")
    page.get_by_role("link", name="New job").click()
    page.get_by_label("Job name").fill("with an environment")
    page.get_by_label("Training script or project").set_input_files(str(path))
    page.get_by_label("GPUs").fill("0")
    page.get_by_label("Software environment").select_option("toml-tools@1")
    page.get_by_role("button", name="Submit job").click()
    page.get_by_role("heading", name="with an environment").wait_for()
    page.locator("[data-role=state]", has_text="Completed").wait_for(timeout=240_000)
    assert "ok = true" in page.locator("[data-role=stdout]").inner_text()
    assert "environment toml-tools@1" in page.locator("[data-role=install]").inner_text()
    assert page.locator("[data-role=environment]").inner_text().startswith("toml-tools@1")
    screenshot("job-with-environment")
