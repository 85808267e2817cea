"""The browser tests' kit, whichever app's folder holds them: Chromium, a tab that fails the
test on a page breaking the Content Security Policy or WCAG 2.1 AA, sign-in, job submission."""

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from tests.kits.accessibility import AccessibilityWatch, from_the_page

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Screenshots of each main page, for a person to look at after a run.
ARTIFACTS = Path(
    os.environ.get(
        "NIGHTSHIFT_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "var" / "test-artifacts"
    )
)

# Playwright's sync API runs an event loop in this thread; the ORM calls in these tests
# are ordinary synchronous setup, which Django's async-safety check would refuse.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    """A fresh browser tab. Any page it shows that breaks the Content Security Policy,
    throws a script error, or has a serious or critical accessibility violation (axe-core,
    WCAG 2.1 AA) fails the test."""
    context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 900})
    accessibility = AccessibilityWatch(context)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.on("dialog", lambda dialog: dialog.accept())  # the confirmations
    problems = []
    page.on(
        "console",
        lambda message: (
            problems.append(f"{page.url}: {message.text}")
            if "Content Security Policy" in message.text and from_the_page(message)
            else None
        ),
    )
    page.on("pageerror", lambda error: problems.append(f"{page.url}: {error}"))
    yield page
    if not page.is_closed() and page.url.startswith("http"):
        accessibility.check_now(page)
    context.close()
    assert problems == [], "the browser refused or failed part of a page"
    assert accessibility.violations == [], "axe-core found serious accessibility violations:\n" + (
        "\n".join(accessibility.violations)
    )


@pytest.fixture
def screenshot(page):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


def sign_in(page, url: str, username: str, password: str = "a-long-test-password") -> None:
    """Through the login form, as a person would, until "My jobs" shows."""
    page.goto(f"{url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="My jobs").wait_for()


@pytest.fixture
def logged_in(page, live_server, live_pipeline):
    get_user_model().objects.create_user("grace", password="a-long-test-password")
    sign_in(page, live_server.url, "grace")
    return page


def submit_job(page, tmp_path, script: str, *, name: str, **fields) -> None:
    path = tmp_path / "train.py"
    path.write_text(script)
    page.get_by_role("link", name="New job").click()
    page.get_by_label("Job name").fill(name)
    page.get_by_label("Training script or project").set_input_files(str(path))
    for label, value in fields.items():
        page.get_by_label(label).fill(str(value))
