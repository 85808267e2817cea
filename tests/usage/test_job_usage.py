"""In Chromium: a student reads what their finished job used, with charts per run, and the
clone button fills the new-job form with the advice; a lead reads the utilisation report."""

import pytest

from tests.campus import campus  # noqa: F401 - a fixture
from tests.kits.browser import sign_in
from tests.usage.helpers import finished_job
from tests.usage.test_utilisation_report import measured_campus  # noqa: F401 - a fixture

pytestmark = pytest.mark.browser


def test_the_job_page_charts_usage_and_the_clone_applies_the_advice(
    page, live_server, django_user_model, fake_bridge, screenshot
):
    student = django_user_model.objects.create_user("grace", password="a-long-test-password")
    job = finished_job(student, fake_bridge)
    sign_in(page, live_server.url, "grace")
    page.goto(f"{live_server.url}/jobs/{job.public_id}/")
    usage = page.locator("[data-role=usage]")
    usage.get_by_text("What it uses").wait_for()
    charts = usage.locator("figure[data-usage]")
    charts.first.wait_for()
    assert sorted(charts.evaluate_all("els => els.map(e => e.dataset.usage)")) == [
        "cpus",
        "disk_mb",
        "gpu_memory_mb",
        "gpu_utilization",
        "memory_mb",
    ]
    memory = usage.locator("figure[data-usage=memory_mb]")
    assert "(last: 1400 MB; asked for 8192)" in memory.inner_text()
    assert memory.locator("[data-role=requested]").count() == 1
    assert usage.locator("[data-role=usage-empty]").is_hidden()
    advice = usage.locator("[data-role=usage-advice]")
    assert "You asked for 2 GPUs and used 1, at 70 % on average." in advice.inner_text()
    screenshot("job-usage")
    advice.get_by_role("link", name="Clone with these settings…").click()
    page.get_by_role("heading", name="New training job").wait_for()
    assert page.get_by_label("GPUs", exact=True).input_value() == "1"
    assert page.get_by_label("CPUs", exact=True).input_value() == "2"
    assert float(page.get_by_label("Memory (GB)", exact=True).input_value()) == 2.5


def test_a_lead_sees_the_utilisation_charts(page, live_server, measured_campus):  # noqa: F811
    sign_in(page, live_server.url, "lena")
    page.goto(
        f"{live_server.url}/reports/utilisation/?period=custom&start=2026-11-02&end=2026-11-03"
    )
    page.get_by_role("heading", name="GPU utilisation").wait_for()
    for name in ("bands", "idle", "energy"):
        chart = page.locator(f"canvas[data-chart={name}]")
        assert int(chart.get_attribute("data-rendered") or 0) >= 1, name
    assert "ada" in page.locator("table[data-table=under_users]").inner_text()
