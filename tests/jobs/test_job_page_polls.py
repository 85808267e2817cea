"""An open job page asks for its status every two seconds; while nothing changes, the page
sends back the ETag it was given, the portal answers 304 and the page asks less often, and
a new log line still shows, sent alone, in one answer."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from jobs import specs, submission
from tests.conftest import script_upload
from tests.kits.browser import sign_in

pytestmark = pytest.mark.browser


def test_an_unchanged_job_page_is_revalidated_and_a_new_log_line_still_shows(
    page, live_server, fake_bridge
):
    student = get_user_model().objects.create_user("grace", password="a-long-test-password")
    job = submission.job_submit(
        user=student, spec=specs.JobSpec(name="watched"), script=script_upload()
    )
    (job.directory / "stdout.txt").write_text("epoch 1\n")
    sign_in(page, live_server.url, "grace")
    # What the server answered, as the network saw it.
    network = page.context.new_cdp_session(page)
    network.send("Network.enable")
    polls, answered, asked_at = set(), [], []

    def sent(event):
        if "status.json" in event["request"]["url"]:
            polls.add(event["requestId"])
            asked_at.append(event["timestamp"])

    def received(event):
        if event["requestId"] in polls:
            answered.append(event["statusCode"])

    network.on("Network.requestWillBeSent", sent)
    network.on("Network.responseReceivedExtraInfo", received)
    page.goto(live_server.url + reverse("jobs:detail", args=[job.public_id]))
    page.get_by_text("epoch 1").wait_for()
    page.wait_for_timeout(7500)
    assert answered[0] == 200
    assert 304 in answered[1:], answered
    # Nothing new: the page asks less often (2 s, then 3 s, up to 10 s). A timer fires no
    # sooner than its delay after the answer, but a loaded machine answers late, so only the
    # lower bound is checked: the last wait was a backed-off one (at a steady 2 s, it would be
    # 2 s and the answer's few milliseconds). CI once saw a 2 s wait take 2.56 s.
    gaps = [later - earlier for earlier, later in zip(asked_at, asked_at[1:])]
    assert gaps[-1] >= 2.95, gaps

    def a_full_answer(response):
        return "status.json" in response.url and response.status == 200

    with (
        page.expect_response(a_full_answer, timeout=15_000) as brought,
        open(job.directory / "stdout.txt", "a") as log,
    ):
        log.write("epoch 2\n")
    # Only the log changed: the answer carries only its new text.
    assert brought.value.json()["logs_only"] is True
    page.get_by_text("epoch 2").wait_for(timeout=10_000)
    # The answer that brought the new line named the next poll's document (from the new
    # offset on): that poll is a 304, not a second full answer.
    changed_at = len(answered)
    for _ in range(100):  # the next poll, 2 s on (CDP events arrive during Playwright calls)
        page.wait_for_timeout(100)
        if len(answered) > changed_at:
            break
    assert answered[changed_at - 1] == 200, answered
    assert answered[changed_at : changed_at + 1] == [304], answered
