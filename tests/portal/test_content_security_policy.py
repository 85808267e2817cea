"""In Chromium, under the portal's Content Security Policy: the pages that run the most
script still work (the `page` fixture fails a test on any CSP violation or script error)."""

import pytest

from tests.kits.browser import sign_in

pytestmark = pytest.mark.browser


def test_the_api_docs_render_from_static_files(page, live_server, campus):
    campus["ada"].set_password("a-long-test-password")
    campus["ada"].save()
    sign_in(page, live_server.url, "ada")
    response = page.goto(f"{live_server.url}/api/v1/docs/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.get_by_text("/api/v1/jobs/", exact=True).first.wait_for()


def test_quota_bars_are_drawn_without_inline_styles(page, live_server, campus):
    vision = campus["vision"]
    vision.gpu_hours = 20  # ada's 9 GPU-hours of the campus fixture: 45 %
    vision.gpu_hours_period_days = 3650
    vision.save()
    campus["ada"].set_password("a-long-test-password")
    campus["ada"].save()
    sign_in(page, live_server.url, "ada")
    page.goto(f"{live_server.url}/accounts/")
    fill = page.locator(".bar [data-percent]").first
    bar_width = page.locator(".bar").first.bounding_box()["width"]
    assert fill.get_attribute("data-percent") == "45"
    assert abs(fill.bounding_box()["width"] - 0.45 * bar_width) < 2


def test_the_admin_works_under_the_policy(page, live_server, campus):
    campus["admin"].set_password("a-long-test-password")
    campus["admin"].save()
    page.goto(f"{live_server.url}/admin/login/")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill("a-long-test-password")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Site administration").wait_for()
    page.goto(f"{live_server.url}/admin/labs/lab/")
    page.get_by_role("link", name="Vision").click()
    page.get_by_role("button", name="Save", exact=True).wait_for()
