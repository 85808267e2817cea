"""In Chromium: a lab lead reserves a workstation from the lab's page, is told plainly when a
request cannot be met (keeping what was typed), and the pool page shows the reservation."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from jobs.models import Workstation
from tests.factories import LabFactory, MembershipFactory
from tests.kits.browser import sign_in

pytestmark = pytest.mark.browser


def local(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M")


def test_a_lead_reserves_a_workstation_and_the_pool_page_shows_it(
    transactional_db, fake_bridge, page, live_server, screenshot
):
    vision = LabFactory(name="Vision")
    lead = get_user_model().objects.create_user("lena", password="a-long-test-password")
    MembershipFactory(lab=vision, user=lead, role="lead")
    for name, gpus in (("ws-volta", 2), ("ws-ampere", 1)):
        Workstation.objects.update_or_create(  # the beat's sync may have recorded it already
            name=name, defaults={"last_seen_at": timezone.now(), "total_gpus": gpus}
        )
    start = timezone.now() + timedelta(hours=2)

    sign_in(page, live_server.url, "lena")
    page.goto(f"{live_server.url}/labs/{vision.pk}/")
    page.get_by_role("link", name="Reserve workstations…").click()
    page.get_by_role("heading", name="Reserve workstations for Vision").wait_for()
    page.get_by_label("Purpose").fill("ML course deadline")
    page.get_by_label("From").fill(local(start))
    page.get_by_label("Until").fill(local(start + timedelta(hours=4)))
    page.get_by_label("GPUs", exact=True).fill("5")
    page.get_by_role("button", name="Reserve").click()
    page.get_by_text("Only 3 GPUs are free to reserve in that window.").wait_for()
    assert page.get_by_label("Purpose").input_value() == "ML course deadline"

    page.get_by_label("GPUs", exact=True).fill("")
    page.get_by_label("ws-volta (2 GPUs)").check()
    page.get_by_role("button", name="Reserve").click()
    page.get_by_text("Reserved ws-volta (2 GPUs) for Vision from").wait_for()
    row = page.locator("[data-role=reservations] tbody tr")
    assert "ML course deadline" in row.inner_text() and "upcoming" in row.inner_text()
    screenshot("lab-reservations")

    page.get_by_role("link", name="Pool").click()
    held = page.locator("tr[data-workstation=ws-volta] [data-role=reservation]")
    assert held.inner_text().startswith("Next: reserved for Vision from")
    # The fortnight's picture: one bar on ws-volta's row, named on hover.
    picture = page.locator("[data-role=reservations-timeline]")
    bar = picture.locator("[data-role=reservation-bar]")
    assert bar.count() == 1
    assert bar.locator("title").text_content().startswith("ws-volta, ML course deadline: reserved")
    assert picture.locator("svg").bounding_box()["width"] > 600
    picture.scroll_into_view_if_needed()
    screenshot("pool-reservations-timeline")
