"""A sweep in a real Chromium against the real pool: a grid from the job form, then the
comparison page with its best run, its table and its charts."""

import pytest

from tests.kits.browser import submit_job

pytestmark = [pytest.mark.condor, pytest.mark.browser, pytest.mark.timeout(300)]

# The loss is lowest for lr 0.01 and batch 64, so the best run is known in advance.
TRAINING = """
import sys
import nightshift
lr, batch = float(sys.argv[2]), int(sys.argv[4])
for step in range(5):
    loss = abs(lr - 0.01) * 10 + 64 / batch / 10 + 1 / (step + 1)
    nightshift.log(step=step, loss=loss)
"""


def chart_points(page, role: str) -> list[int]:
    return page.evaluate(
        """(role) => Chart.getChart(document.querySelector(`[data-role=${role}]`))
                      .data.datasets.map((set) => set.data.length)""",
        role,
    )


def test_a_student_sweeps_a_grid_and_compares_the_runs(logged_in, screenshot, tmp_path, settings):
    page = logged_in
    # Written by the worker, as a large sweep is: the page answers at once and follows.
    settings.SWEEP_RUNS_IN_REQUEST = 4
    grid = "lr = 0.1, 0.01, 0.001\nbatch = 32, 64"
    submit_job(
        page,
        tmp_path,
        TRAINING,
        name="lr grid",
        GPUs=0,
        **{"Arguments": "--lr\n{lr}\n--batch\n{batch}", "Parameter sweep (optional)": grid},
    )
    page.get_by_role("button", name="Submit job").click()
    page.get_by_role("heading", name="lr grid").wait_for()
    page.get_by_text("6 runs are on their way to the pool").wait_for()
    # The progress part follows the worker and reloads the page once HTCondor has them all
    # (the cluster may show before that, beside the folders still being filled).
    page.locator("[data-role=sweep-progress]").wait_for(state="detached", timeout=60_000)
    assert page.get_by_text("HTCondor cluster").count() == 1
    assert page.locator("[data-role=runs] tbody tr[data-job]").count() == 6
    for _ in range(60):  # reloaded until every run has completed
        if page.locator("[data-role=runs] [data-role=state]", has_text="Completed").count() == 6:
            break
        page.wait_for_timeout(3000)
        page.reload()
    assert page.locator("[data-role=runs] [data-role=state]", has_text="Completed").count() == 6

    best = page.locator("[data-role=best-run]")
    assert "Best loss (lowest)" in best.inner_text()
    assert "lr = 0.01, batch = 64" in best.inner_text()
    assert page.locator("tr.best").get_attribute("data-index") == "3"
    # The five best runs are overlaid at first, five steps each; ticking the sixth adds it.
    page.wait_for_function(
        "() => Chart.getChart(document.querySelector('[data-role=curves]'))"
        ".data.datasets.length === 5"
    )
    assert chart_points(page, "curves") == [5] * 5
    page.locator("[data-role=compare]:not(:checked)").check()
    page.wait_for_function(
        "() => Chart.getChart(document.querySelector('[data-role=curves]'))"
        ".data.datasets.length === 6"
    )
    assert chart_points(page, "scatter") == [6]
    screenshot("sweep-page")

    page.get_by_role("link", name="Best loss").click()
    indexes = page.locator("[data-role=runs] tbody tr").evaluate_all(
        "(rows) => rows.map((row) => row.dataset.index)"
    )
    assert indexes[0] == "3"
    with page.expect_download() as download:
        page.get_by_role("link", name="CSV").click()
    assert download.value.suggested_filename.startswith("sweep-")
