"""In Chromium: make a token on the account page, use it against the API, read the API docs."""

import httpx
import pytest
from django.contrib.auth import get_user_model

from tests.kits.browser import sign_in

pytestmark = pytest.mark.browser


@pytest.fixture
def signed_in(page, live_server, transactional_db):
    get_user_model().objects.create_user("lin", password="a-long-test-password")
    sign_in(page, live_server.url, "lin")
    return page


def me_with(live_server, secret: str) -> httpx.Response:
    return httpx.get(f"{live_server.url}/api/v1/me/", headers={"Authorization": f"Bearer {secret}"})


def test_a_token_made_on_the_page_works_until_revoked(signed_in, live_server, screenshot):
    page = signed_in
    page.get_by_role("link", name="My account").click()
    page.get_by_role("link", name="API tokens").click()
    page.get_by_label("Token name").fill("laptop CLI")
    page.get_by_label("Expires after").select_option(label="30 days")
    page.get_by_role("button", name="Create token").click()
    secret = page.locator("#new-token").inner_text().strip()
    screenshot("api-tokens")
    assert me_with(live_server, secret).json()["username"] == "lin"

    page.get_by_role("button", name="Revoke").click()  # the confirmation is accepted
    page.get_by_text("Revoked “laptop CLI”").wait_for()
    assert me_with(live_server, secret).status_code == 401


def test_the_interactive_api_docs_render_every_group(signed_in, live_server, screenshot):
    page = signed_in
    page.goto(f"{live_server.url}/api/")
    page.get_by_text("Nightshift API").first.wait_for()
    page.locator(".opblock-summary-path", has_text="/api/v1/jobs/").first.wait_for()
    assert page.locator(".opblock").count() >= 20
    screenshot("api-docs")
