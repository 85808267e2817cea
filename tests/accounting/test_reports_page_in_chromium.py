"""In Chromium: a lab lead opens the usage report, sees its charts drawn, and downloads a CSV."""

import csv

import pytest

from tests.kits.browser import sign_in

pytestmark = pytest.mark.browser


def test_a_lead_sees_the_charts_and_downloads_a_table(page, live_server, campus, screenshot):
    sign_in(page, live_server.url, "lena")
    page.get_by_role("link", name="Reports").click()
    page.get_by_role("heading", name="Usage reports").wait_for()
    page.get_by_label("Period", exact=True).select_option(label="Custom range")
    page.get_by_label("From", exact=True).fill("2026-11-02")
    page.get_by_label("To", exact=True).fill("2026-11-03")
    page.get_by_role("button", name="Show").click()
    page.get_by_text("Vision · 2026-11-02 to 2026-11-03").wait_for()

    # The page's scripts draw the charts after its text is shown.
    page.wait_for_function(
        "() => [...document.querySelectorAll('canvas[data-chart]')]"
        ".every((canvas) => canvas.dataset.rendered)"
    )
    charts = page.locator("canvas[data-chart]")
    assert charts.count() == 6
    for index in range(charts.count()):
        chart = charts.nth(index)
        name = chart.get_attribute("data-chart")
        assert int(chart.get_attribute("data-rendered") or 0) >= 1, name
        box = chart.bounding_box()
        assert box["width"] > 200 and box["height"] > 100
    # Chart.js drew something: the over-time canvas is not blank.
    drawn = page.evaluate("""() => {
        const c = document.querySelector('canvas[data-chart=over_time]');
        const pixels = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        return pixels.some((value, i) => i % 4 === 3 && value > 0);
    }""")
    assert drawn
    usage = page.locator("table[data-table=usage]")
    assert "ada" in usage.inner_text() and "9.0" in usage.inner_text()
    assert "bob" not in page.content()
    screenshot("reports")

    with page.expect_download() as download_info:
        page.locator("section", has=usage).get_by_role("link", name="Download CSV").first.click()
    download = download_info.value
    assert download.suggested_filename.startswith("nightshift-usage-vision-2026-11-02")
    with open(download.path(), newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][:2] == ["User", "GPU-hours"] and rows[1][:2] == ["ada", "9.0"]
