"""The notification settings page: choices, this browser, a webhook, a test."""

import json

import pytest
from django.urls import reverse

from audit.models import AuditEntry
from notifications.models import Preference, PushSubscription, Webhook
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

URL = "/notifications/"
SUBSCRIPTION = {
    "endpoint": "https://push.example.org/send/abc",
    "keys": {"p256dh": "BNc" + "a" * 84, "auth": "c2VjcmV0c2VjcmV0MTIz"},
}


def test_the_page_shows_each_event_with_its_default_channels(student_client, notify_settings):
    page = student_client.get(URL)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="job.ended:push" aria-label="A job completes or fails: Browser" checked' in html
    assert 'name="job.ended:email" aria-label="A job completes or fails: E-mail">' in html
    assert 'data-push-key="B' in html


def test_saving_choices_keeps_them_and_audits_the_change(student, student_client):
    answer = student_client.post(URL, {"job.ended:email": "on", "job.held:push": "on"})
    assert answer.status_code == 302
    ended = Preference.objects.get(user=student, event="job.ended")
    assert (ended.push, ended.email, ended.webhook) == (False, True, False)
    assert Preference.objects.get(user=student, event="job.started").channels == frozenset()
    assert AuditEntry.objects.filter(action="notification preferences changed").exists()


def test_a_browser_subscription_is_kept_for_its_owner(student, student_client, notify_settings):
    answer = student_client.post(
        reverse("notifications:push_subscribe"),
        json.dumps({"subscription": SUBSCRIPTION, "label": "Chrome on Linux"}),
        content_type="application/json",
    )
    assert answer.status_code == 201
    kept = PushSubscription.objects.get()
    assert (kept.user, kept.label, kept.endpoint) == (
        student,
        "Chrome on Linux",
        SUBSCRIPTION["endpoint"],
    )
    assert "Chrome on Linux" in student_client.get(URL).content.decode()


@pytest.mark.parametrize(
    "body, error",
    [
        ("not json", "no subscription"),
        (json.dumps([1]), "no subscription"),
        (json.dumps({"subscription": {"endpoint": "https://x.org/"}}), "has no keys"),
        (json.dumps({"subscription": {**SUBSCRIPTION, "endpoint": "ftp://x.org/"}}), "https://"),
        (
            json.dumps({"subscription": {**SUBSCRIPTION, "keys": {"p256dh": "", "auth": "a"}}}),
            "missing",
        ),
    ],
)
def test_a_bad_subscription_is_refused_with_a_reason(student_client, notify_settings, body, error):
    answer = student_client.post(
        reverse("notifications:push_subscribe"), body, content_type="application/json"
    )
    assert answer.status_code == 400
    assert error in answer.json()["error"]
    assert not PushSubscription.objects.exists()


def test_no_subscription_is_taken_without_a_site_key(student_client, settings, tmp_path):
    settings.VAPID_PRIVATE_KEY = tmp_path / "none.pem"
    answer = student_client.post(
        reverse("notifications:push_subscribe"),
        json.dumps({"subscription": SUBSCRIPTION}),
        content_type="application/json",
    )
    assert answer.status_code == 409
    assert (
        "An administrator has not set up browser notifications"
        in student_client.get(URL).content.decode()
    )


def test_nobody_removes_another_persons_browser(student_client):
    theirs = PushSubscription.objects.create(
        user=UserFactory(), endpoint="https://push.example.org/x", p256dh="k", auth="a"
    )
    answer = student_client.post(reverse("notifications:push_unsubscribe", args=[theirs.pk]))
    assert answer.status_code == 404
    assert PushSubscription.objects.filter(pk=theirs.pk).exists()


def test_a_new_webhook_shows_its_secret_once(
    student, student_client, notify_settings, webhook_receiver
):
    answer = student_client.post(reverse("notifications:webhook"), {"url": webhook_receiver.url})
    secret = Webhook.objects.get(user=student).secret
    assert secret.startswith("whsec_") and secret in answer.content.decode()
    assert secret not in student_client.get(URL).content.decode()
    changed = student_client.post(
        reverse("notifications:webhook"), {"url": webhook_receiver.url + "/x"}
    )
    assert changed.status_code == 302
    assert Webhook.objects.get(user=student).secret == secret
    rotated = student_client.post(reverse("notifications:webhook"), {"action": "rotate"})
    assert Webhook.objects.get(user=student).secret != secret
    assert Webhook.objects.get(user=student).secret in rotated.content.decode()


def test_a_webhook_into_the_portals_network_is_refused_and_the_address_kept(
    student_client, settings
):
    settings.NOTIFY_URL_ALLOW = []
    answer = student_client.post(
        reverse("notifications:webhook"), {"url": "http://127.0.0.1:5432/"}
    )
    assert answer.status_code == 400
    html = answer.content.decode()
    assert "private, loopback or link-local" in html
    assert 'value="http://127.0.0.1:5432/"' in html
    assert not Webhook.objects.exists()


def test_a_test_notification_needs_somewhere_to_go(student, student_client, notify_settings):
    student.email = ""
    student.save(update_fields=["email"])
    page = student_client.post(reverse("notifications:test"), follow=True)
    assert "There is nowhere to send it yet" in page.content.decode()


def test_a_test_notification_reaches_the_webhook(
    student_client, notify_settings, webhook_receiver, django_capture_on_commit_callbacks
):
    student_client.post(reverse("notifications:webhook"), {"url": webhook_receiver.url})
    with django_capture_on_commit_callbacks(execute=False) as queued:
        page = student_client.post(reverse("notifications:test"), follow=True)
    assert "A test is on its way by" in page.content.decode()
    assert queued


def test_the_service_worker_is_served_from_the_root(client):
    answer = client.get("/service-worker.js")
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/javascript")
    assert b"showNotification" in answer.content


def test_the_page_asks_for_a_sign_in(client):
    assert client.get(URL).status_code == 302
    answer = client.post(
        reverse("notifications:push_subscribe"), "{}", content_type="application/json"
    )
    assert answer.status_code == 302


def test_a_hostile_browser_label_is_kept_as_text_and_shown_escaped(
    student, student_client, notify_settings
):
    label = '<script>alert(1)</script>" onmouseover="steal()' + "x" * 300
    answer = student_client.post(
        reverse("notifications:push_subscribe"),
        json.dumps({"subscription": SUBSCRIPTION, "label": label}),
        content_type="application/json",
    )
    assert answer.status_code == 201
    assert PushSubscription.objects.get().label == label[:200]
    html = student_client.get(URL).content.decode()
    assert "<script>alert(1)" not in html and '" onmouseover="steal()' not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot; onmouseover=&quot;steal()" in html
