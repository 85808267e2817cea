"""Browser-facing defences: CSRF on every state change, security headers on every kind of
answer, and the session cookie's flags."""

import pytest
from django.test import Client
from django.urls import reverse

from tests.security.test_route_matrix import World, routes, url_of, world  # noqa: F401

pytestmark = pytest.mark.django_db

# Routes that take a POST without a CSRF token, and why that is safe.
CSRF_EXEMPT = {
    # Trades a username and password for an API token in the response body: no cookie is
    # read, so a forged cross-site request gains the forger nothing.
    "api:password-token",
}


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_no_route_changes_anything_without_a_csrf_token(world, method):  # noqa: F811
    """As the signed-in owner, with the session cookie a forged cross-site request carries."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(world.users["owner"])
    accepted = []
    for key, pattern, name in routes():
        if key in CSRF_EXEMPT:
            continue
        url = url_of(key, pattern, name, world)
        response = getattr(browser, method)(url, {"registration": world.registration_id})
        if response.status_code not in (403, 404, 405):
            accepted.append(f"{method.upper()} {url}: {response.status_code}")
        elif response.status_code == 404 and not url.startswith("/api/v1/"):
            accepted.append(f"{method.upper()} {url}: 404 (no CSRF check)")
    assert accepted == []
    job = world.job
    job.refresh_from_db()
    assert (job.state, job.events.count()) == ("idle", 2)
    assert world.users["owner"].access_tokens.get().revoked_at is None


def test_a_request_with_the_token_goes_through(world):  # noqa: F811
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(world.users["owner"])
    page = browser.get(reverse("jobs:detail", args=[world.job.public_id]))
    token = page.cookies["csrftoken"].value
    response = browser.post(
        reverse("jobs:hold", args=[world.job.public_id]), HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 302
    world.job.refresh_from_db()
    assert world.job.events.filter(kind="hold requested").exists()


def headers_are_safe(response) -> None:
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    policy = response["Content-Security-Policy"]
    for directive in (
        "default-src 'self'",
        "script-src 'self'",
        "object-src 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ):
        assert directive in policy


def test_pages_answers_errors_and_downloads_all_carry_the_security_headers(client, world):  # noqa: F811
    (world.job.directory / "outputs" / "page.html").write_text("<script>alert(1)</script>")
    client.force_login(world.users["owner"])
    job = world.job.public_id
    answers = {
        "page": client.get(reverse("jobs:detail", args=[job])),
        "sign-in page": Client().get(reverse("login")),
        "API": client.get(reverse("api:job-list")),
        "API error": client.get("/api/v1/nothing/"),
        "web 404": client.get("/no-such-page/"),
        "log": client.get(reverse("jobs:log", args=[job, "stdout"])),
        "output": client.get(reverse("jobs:output", args=[job, "outputs/page.html"])),
    }
    for what, response in answers.items():
        headers_are_safe(response)
    # A job's HTML output is downloaded, never rendered on the portal's origin.
    output = answers["output"]
    assert output["Content-Disposition"].startswith("attachment;")
    assert answers["log"]["Content-Type"].startswith("text/plain")


def test_the_session_cookie_is_out_of_scripts_reach_and_stays_on_this_site(world):  # noqa: F811
    browser = Client()
    world.users["owner"].set_password("a-long-pw-1")
    world.users["owner"].save()
    response = browser.post(reverse("login"), {"username": "owner", "password": "a-long-pw-1"})
    assert response.status_code == 302
    session = response.cookies["sessionid"]
    assert session["httponly"] is True
    assert session["samesite"] == "Lax"
