"""Browser notifications from the settings page to a shown notification, in Chromium.

Chromium's pushManager.subscribe() registers with Google's push service (FCM), which this
machine cannot reach; the test stands in for that one call with a subscription whose push
service runs on 127.0.0.1 and whose keys the test holds. The rest is real: the page's
script asks for permission and sends the subscription, the portal encrypts and signs a
push to that service (which decrypts it as the browser would), and the decrypted message
goes to the portal's service worker through the DevTools protocol, which shows it."""

import json

import pytest
from django.contrib.auth import get_user_model

from notifications.models import PushSubscription
from tests.kits.browser import sign_in

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}

SUBSCRIBE_STAND_IN = """
subscription => {
  const stand_in = { endpoint: subscription.endpoint, toJSON: () => subscription };
  PushManager.prototype.getSubscription = async function () { return null; };
  PushManager.prototype.subscribe = async function (options) {
    if (!options.userVisibleOnly || options.applicationServerKey.byteLength !== 65) {
      throw new Error("subscribe() was called without the site's key");
    }
    return stand_in;
  };
}
"""

# Counts the notifications the worker's push handler has finished showing. Polling
# getNotifications() alone is not enough: Chromium drops from that list a notification it is
# still displaying when the call started (its database row is seen before its display), so a
# poll racing the push event could miss it for good. Seen about once in twenty runs with the
# disk busy; the notification itself was displayed.
COUNT_SHOWN = """() => {
  const registration = self.registration;
  const show = registration.showNotification.bind(registration);
  self.shownByTest = 0;
  registration.showNotification = (...args) =>
    show(...args).then(() => { self.shownByTest += 1; });
}"""

SHOWN = """async () => {
  const registration = await navigator.serviceWorker.ready;
  const shown = await registration.getNotifications();
  return shown.map(n => [n.title, n.body, n.data.url]);
}"""


@pytest.fixture
def ada(page, live_server, fake_bridge, notify_settings):
    user = get_user_model().objects.create_user(
        "ada", email="ada@example.edu", password="a-long-test-password"
    )
    page.context.grant_permissions(["notifications"], origin=live_server.url)
    sign_in(page, live_server.url, "ada")
    return user


def test_a_student_turns_on_browser_notifications_and_sees_one(
    page, ada, live_server, push_service, screenshot
):
    subscription = push_service.keys("chromium")
    page.add_init_script(f"({SUBSCRIBE_STAND_IN})({json.dumps(subscription)})")
    page.goto(f"{live_server.url}/accounts/")
    page.get_by_role("link", name="Notifications").click()
    page.get_by_role("heading", name="Notifications", exact=True).wait_for()
    page.get_by_role("button", name="Show notifications in this browser").click()
    page.get_by_text("since").wait_for()
    kept = PushSubscription.objects.get(user=ada)
    assert kept.endpoint == subscription["endpoint"]
    assert "on Linux" in kept.label
    screenshot("notifications-settings")

    page.get_by_role("button", name="Send a test").click()
    page.get_by_text("A test is on its way by Browser, E-mail").wait_for()
    [message] = push_service.received
    payload = push_service.decrypted(message)
    assert payload["title"] == "A test from Nightshift"

    devtools = page.context.new_cdp_session(page)
    registrations = []
    devtools.on(
        "ServiceWorker.workerRegistrationUpdated",
        lambda event: registrations.extend(event["registrations"]),
    )
    devtools.send("ServiceWorker.enable")
    page.evaluate("navigator.serviceWorker.ready.then(() => true)")
    for _ in range(100):  # DevTools reports the registrations as an event
        ours = [r for r in registrations if r["scopeURL"] == f"{live_server.url}/"]
        if ours:
            break
        page.wait_for_timeout(100)
    registration = ours[0]
    [worker] = page.context.service_workers
    worker.evaluate(COUNT_SHOWN)
    devtools.send(
        "ServiceWorker.deliverPushMessage",
        {
            "origin": live_server.url,
            "registrationId": registration["registrationId"],
            "data": json.dumps(payload),
        },
    )
    for _ in range(100):  # the push event runs in the worker, apart from the page
        if worker.evaluate("() => self.shownByTest"):
            break
        page.wait_for_timeout(100)
    assert page.evaluate(SHOWN) == [
        ["A test from Nightshift", "Notifications reach you here.", "/notifications/"]
    ]


def test_the_choices_save_and_fit_a_phone(page, ada, live_server, screenshot):
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/notifications/")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    page.get_by_role("checkbox", name="A job is held: E-mail").check()
    page.get_by_role("checkbox", name="A job starts: Browser").uncheck()
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Your notification choices are saved.").wait_for()
    assert page.get_by_role("checkbox", name="A job is held: E-mail").is_checked()
    assert not page.get_by_role("checkbox", name="A job starts: Browser").is_checked()
    # Every box is on the screen, none beyond its right edge, and big enough for a thumb.
    for box in page.get_by_role("checkbox").all():
        shape = box.bounding_box()
        assert shape["x"] + shape["width"] <= PHONE["width"] and shape["width"] >= 20
    screenshot("phone-notifications")
