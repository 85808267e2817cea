"""A hostile served endpoint, opened through the live proxy in a real Chromium by its own
owner: whatever its headers and scripts try, the browser keeps the portal's cookies, and
the page reaches no other job's pages."""

from urllib.parse import parse_qs, urlsplit

import pytest

from jobs.models import Job, JobState
from live_sessions.services import live_ticket
from tests.live_sessions.conftest import lab_with_people, proxy, stand_in_job, tunnels  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def running_job(owner, services):
    return Job.objects.create(
        owner=owner,
        name="hostile",
        output_dir="/nonexistent",
        state=JobState.RUNNING,
        cluster_id=41,
        proc_id=0,
        request={"live_services": list(services), "python": "/usr/bin/python3"},
    )


def enter(page, live_url, user, job, service):
    """Into the proxy as a browser gets there: the proxy's binding secret first (its redirect
    to the portal, not followed here), then the ticket the portal makes for it."""
    prefix = f"{live_url}/live/{job.public_id}/{service}/_nightshift"
    began = page.context.request.get(f"{prefix}/begin", max_redirects=0)
    bind = parse_qs(urlsplit(began.headers["location"]).query)["bind"][0]
    ticket = live_ticket(user=user, job=job, service=service, bind=bind)
    page.goto(f"{prefix}/enter?ticket={ticket}")


def test_a_served_page_keeps_to_itself_in_a_real_browser(browser, proxy, lab_with_people):  # noqa: F811
    _, owner, _, _ = lab_with_people
    served, notebook = running_job(owner, ["serve"]), running_job(owner, ["notebook"])
    context = browser.new_context()
    # The portal's session cookie, as a signed-in browser holds it (cookies ignore ports).
    context.add_cookies(
        [{"name": "sessionid", "value": "the-real-session", "url": "http://127.0.0.1:8000/"}]
    )
    page = context.new_page()
    enter(page, proxy.url, owner, notebook, "notebook")  # the owner's notebook is open too
    enter(page, proxy.url, owner, served, "serve")
    page.goto(f"{proxy.url}/live/{served.public_id}/serve/hostile?other={notebook.public_id}")
    page.locator("[data-what=done]").wait_for(timeout=20_000)
    seen = {p.get_attribute("data-what"): p.inner_text() for p in page.locator("#out p").all()}
    cookies = {(c["name"], c["value"]) for c in context.cookies()}
    context.close()

    assert ("sessionid", "the-real-session") in cookies
    assert not [c for c in cookies if "attacker" in c[1]], cookies
    assert seen["cookie"].startswith("cookie: refused"), seen
    assert seen["storage"].startswith("storage: refused"), seen
    assert seen["worker"].startswith("worker: refused"), seen
    # The other job's notebook answers nothing the page can read.
    assert seen["other"].startswith("other: refused") or "status 200" not in seen["other"], seen
