"""In Chromium: a workstation's owner opens it from the menu, sets when it is lent (kept and
said in words), asks for it back and watches the countdown, then lends it again; the chart
of what it gave, GPU-hours and kWh, is drawn."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from accounting.models import UsageRecord
from jobs.models import Job, JobState, Workstation
from lending.models import WorkstationOwner
from tests.factories import LabFactory
from tests.kits.browser import sign_in

pytestmark = pytest.mark.browser


def test_an_owner_sets_terms_asks_it_back_and_lends_it_again(
    transactional_db, fake_bridge, page, live_server, screenshot
):
    prof = get_user_model().objects.create_user("prof", password="a-long-test-password")
    Workstation.objects.update_or_create(  # the beat's sync may have recorded it already
        name="ws-volta", defaults={"last_seen_at": timezone.now(), "total_gpus": 2}
    )
    WorkstationOwner.objects.create(workstation="ws-volta", user=prof)
    vision = LabFactory(name="Vision")
    job = Job.objects.create(owner=prof, lab=vision, name="j", state=JobState.COMPLETED)
    started = timezone.now() - timedelta(days=8)
    UsageRecord.objects.create(
        job=job,
        user=prof,
        lab=vision,
        started_at=started,
        ended_at=started + timedelta(hours=5),
        workstation="ws-volta",
        gpus=2,
        wall_s=5 * 3600,
        gpu_energy_kwh=1.85,
        co2e_kg=0.43,
        energy_simulated=True,
    )

    sign_in(page, live_server.url, "prof")
    page.get_by_role("link", name="My workstations").click()
    page.get_by_role("link", name="ws-volta").click()
    page.get_by_role("heading", name="ws-volta", exact=True).wait_for()
    given = page.locator("[data-role=given-total]").inner_text()
    assert "10.0 GPU-hours to 1 student" in given
    assert "1.85 kWh (430 g CO2e) above its idle draw" in given
    assert "Its GPUs are simulated" in given
    # The page's scripts run after its heading is shown.
    page.wait_for_function(
        "() => window.Chart && Chart.getChart(document.querySelector('canvas[data-chart=given]'))"
    )
    chart = page.locator("canvas[data-chart=given]")
    assert chart.bounding_box()["height"] > 100  # Chart.js drew into it
    assert page.evaluate(
        "() => Chart.getChart(document.querySelector('canvas[data-chart=given]'))"
        ".data.datasets.map((set) => set.label)"
    ) == ["GPU-hours", "kWh above idle"]

    page.get_by_label("Saturday").check()
    page.get_by_label("Sunday").check()
    for day in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"):
        page.get_by_label(day).uncheck()
    page.get_by_label("At most this many GPUs").fill("1")
    page.get_by_label("Vision").check()
    page.get_by_role("button", name="Save terms").click()
    page.get_by_text("ws-volta's terms are saved").wait_for()
    terms = page.locator("[data-role=terms]").inner_text()
    assert terms == "Lent weekends, all day, at most 1 GPU, to Vision only."
    assert page.get_by_label("Saturday").is_checked()
    assert not page.get_by_label("Monday").is_checked()

    page.get_by_label("I need it back in (minutes)").fill("3")
    page.get_by_role("button", name="I need it back").click()
    countdown = page.locator("[data-countdown]")
    countdown.wait_for()
    first = countdown.inner_text()
    assert first.startswith(("2 min", "3 min")), first
    page.wait_for_function(
        "(first) => document.querySelector('[data-countdown]').textContent !== first", arg=first
    )
    screenshot("workstation-reclaim")
    page.get_by_role("button", name="Lend it again now").click()
    page.get_by_text("ws-volta is lent again on its terms.").wait_for()
    assert page.locator("[data-countdown]").count() == 0


def test_on_a_phone_the_owners_page_and_the_claim_page_fit_the_screen(
    transactional_db, fake_bridge, page, live_server, screenshot
):
    from tests.portal.test_phone_layout import PAGE_WIDTH, PHONE

    prof = get_user_model().objects.create_user("prof", password="a-long-test-password")
    WorkstationOwner.objects.create(workstation="ws-volta", user=prof)
    LabFactory(name="Vision")
    sign_in(page, live_server.url, "prof")
    page.set_viewport_size(PHONE)
    for path, name in (
        ("/workstations/ws-volta/", "phone-workstation"),
        ("/workstations/claim/", "phone-claim"),
    ):
        page.goto(f"{live_server.url}{path}")
        assert page.evaluate(PAGE_WIDTH) <= PHONE["width"], path
        screenshot(name)
