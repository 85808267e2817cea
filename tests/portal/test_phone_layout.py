"""The portal on a phone (390 x 844): the navigation folds into a menu a thumb can use, and
the job list, the job page and the new-job form fit the screen, their tables scrolling
inside their own box. On a desktop the navigation shows as before."""

import pytest
from django.contrib.auth import get_user_model

from jobs import specs, submission
from tests.conftest import script_upload
from tests.kits.browser import sign_in

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
PAGE_WIDTH = "() => document.documentElement.scrollWidth"


@pytest.fixture
def ada(page, live_server, fake_bridge):
    user = get_user_model().objects.create_user("ada", password="a-long-test-password")
    for number in range(3):
        submission.job_submit(
            user=user,
            spec=specs.JobSpec(name=f"a job with a rather long name to see it wrap {number}"),
            script=script_upload(),
        )
    sign_in(page, live_server.url, "ada")
    return user


def test_on_a_phone_the_navigation_is_a_menu_with_thumb_sized_links(page, ada, screenshot):
    page.set_viewport_size(PHONE)
    menu = page.get_by_role("button", name="Menu")
    my_jobs = page.get_by_role("link", name="My jobs")
    assert menu.is_visible() and not my_jobs.is_visible()
    assert menu.get_attribute("aria-expanded") == "false"
    menu.click()
    assert menu.get_attribute("aria-expanded") == "true"
    assert my_jobs.is_visible()
    for name in ("My jobs", "New job", "New notebook", "My account"):
        box = page.get_by_role("link", name=name).bounding_box()
        assert box["height"] >= 44, (name, box)
    screenshot("phone-menu")
    page.get_by_role("link", name="New notebook").click()
    page.get_by_role("heading", name="New notebook session").wait_for()


def test_on_a_phone_the_main_pages_fit_the_screen(page, ada, live_server, screenshot):
    page.set_viewport_size(PHONE)
    for path, name in (
        ("/jobs/", "phone-jobs"),
        ("/jobs/new/", "phone-new-job"),
        ("/sessions/new/", "phone-new-notebook"),
    ):
        page.goto(f"{live_server.url}{path}")
        assert page.evaluate(PAGE_WIDTH) <= PHONE["width"], path
        screenshot(name)
    page.goto(f"{live_server.url}/jobs/")
    page.get_by_role("link", name="a job with a rather long name to see it wrap 0").click()
    page.get_by_role("heading", name="a job with a rather long name to see it wrap 0").wait_for()
    assert page.evaluate(PAGE_WIDTH) <= PHONE["width"]
    screenshot("phone-job")


def test_on_a_desktop_the_navigation_shows_without_a_menu(page, ada):
    assert not page.get_by_role("button", name="Menu").is_visible()
    assert page.get_by_role("link", name="My jobs").is_visible()
