"""In Chromium: a newcomer registers for a lab, its lead approves them, they submit a job."""

import pytest
from django.contrib.auth import get_user_model

from labs.models import Lab
from tests.factories import MembershipFactory
from tests.kits.browser import sign_in

pytestmark = pytest.mark.browser


def sign_out(page) -> None:
    page.get_by_role("button", name="Log out").click()


def test_register_get_approved_by_the_lead_and_submit(
    page, live_server, transactional_db, fake_bridge, settings, screenshot, tmp_path
):
    settings.REGISTRATION_MODE = "approval"
    vision = Lab.objects.create(name="Vision", gpu_hours=40, max_concurrent_gpus=4)
    lead = get_user_model().objects.create_user("lin", "lin@example.org", "a-long-test-password")
    MembershipFactory(lab=vision, user=lead, role="lead")

    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_role("link", name="Create an account").click()
    page.get_by_label("Username").fill("newbie")
    page.get_by_label("Email").fill("newbie@example.org")
    page.get_by_label("Lab").select_option(label="Vision")
    page.get_by_label("Password", exact=True).fill("Correct-Horse-42")
    page.get_by_label("Password confirmation").fill("Correct-Horse-42")
    page.get_by_label("What will you run?").fill("resnet baselines")
    page.get_by_role("button", name="Create account").click()
    page.get_by_text("waits for approval").first.wait_for()
    sign_out(page)

    sign_in(page, live_server.url, "lin", "a-long-test-password")
    page.get_by_role("link", name="My account").click()
    page.get_by_role("link", name="1 account to approve").click()
    page.get_by_text("resnet baselines").wait_for()
    page.get_by_role("button", name="Approve").click()
    page.get_by_text("Approved newbie.").wait_for()
    sign_out(page)

    sign_in(page, live_server.url, "newbie", "Correct-Horse-42")
    page.get_by_role("link", name="My account").click()
    page.get_by_role("meter", name="GPU-hours, last 7 days").wait_for()
    screenshot("my-account-quota-bars")
    script = tmp_path / "train.py"
    script.write_text("print('hello')\n")
    page.get_by_role("link", name="New job").click()
    page.get_by_label("Job name").fill("first job")
    page.get_by_label("Training script or project").set_input_files(str(script))
    page.get_by_label("GPUs", exact=True).fill("0")
    page.get_by_role("button", name="Submit").click()
    page.get_by_text("is on its way to the pool").wait_for()
