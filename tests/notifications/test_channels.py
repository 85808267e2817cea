"""Each channel, sent for real to a receiver on 127.0.0.1: a webhook that checks the
signature, a push service that decrypts the message, an SMTP server."""

import json

import pytest
from py_vapid import Vapid02
from standardwebhooks import Webhook as Verifier

from notifications import services
from notifications.events import Event
from notifications.models import Delivery, Notification, PushSubscription, Webhook
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def told(user, key="job:1:ended", **extra):
    occasion = services.Occasion(
        user=user,
        event=Event.JOB_ENDED,
        key=key,
        title="“mnist” completed",
        body="Its outputs are ready to download.",
        url="/jobs/1/",
        **extra,
    )
    return services.notify([occasion])


def send_all() -> list[str]:
    return [services.delivery_send(d.pk) for d in Delivery.objects.order_by("pk")]


def test_a_webhook_receives_a_signed_message_its_secret_verifies(
    notify_settings, webhook_receiver, django_capture_on_commit_callbacks
):
    student = UserFactory(email="")
    _, secret = services.webhook_set(user=student, url=webhook_receiver.url + "/hook")
    told(student)
    assert send_all() == ["sent"]
    [message] = webhook_receiver.received
    body = Verifier(secret).verify(message.body, message.headers)
    assert body["type"] == "job.ended"
    assert body["data"]["url"] == "https://nightshift.example.edu/jobs/1/"
    assert body["text"].startswith("“mnist” completed.")
    notification = Notification.objects.get()
    assert message.headers["webhook-id"] == f"msg_{notification.public_id.hex}"


def test_a_message_signed_with_another_secret_fails_verification(notify_settings, webhook_receiver):
    student = UserFactory(email="")
    services.webhook_set(user=student, url=webhook_receiver.url)
    told(student)
    send_all()
    other = services.channels.new_webhook_secret()
    with pytest.raises(Exception, match="signature"):
        Verifier(other).verify(
            webhook_receiver.received[0].body, webhook_receiver.received[0].headers
        )


def test_a_failing_webhook_is_tried_again_with_the_same_id_and_then_delivered(
    notify_settings, webhook_receiver
):
    student = UserFactory(email="")
    services.webhook_set(user=student, url=webhook_receiver.url)
    webhook_receiver.answers = [503, 429]
    told(student)
    delivery = Delivery.objects.get()
    assert services.delivery_send(delivery.pk) == "retry"
    assert services.delivery_send(delivery.pk) == "retry"
    assert services.delivery_send(delivery.pk) == "sent"
    assert services.delivery_send(delivery.pk) == "skipped"
    ids = {message.headers["webhook-id"] for message in webhook_receiver.received}
    assert len(webhook_receiver.received) == 3 and len(ids) == 1
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == ("sent", 3)


def test_a_webhook_that_refuses_is_not_tried_again(notify_settings, webhook_receiver):
    student = UserFactory(email="")
    services.webhook_set(user=student, url=webhook_receiver.url)
    webhook_receiver.answers = [404]
    told(student)
    assert send_all() == ["failed"]
    delivery = Delivery.objects.get()
    assert "404" in delivery.last_error
    assert "404" in Webhook.objects.get(user=student).last_status


def test_a_webhook_given_up_after_the_last_try(notify_settings, webhook_receiver):
    student = UserFactory(email="")
    services.webhook_set(user=student, url=webhook_receiver.url)
    webhook_receiver.answers = [500] * services.MOST_ATTEMPTS
    told(student)
    delivery = Delivery.objects.get()
    outcomes = [services.delivery_send(delivery.pk) for _ in range(services.MOST_ATTEMPTS)]
    assert outcomes == ["retry"] * (services.MOST_ATTEMPTS - 1) + ["failed"]
    delivery.refresh_from_db()
    assert "Gave up after 8 tries" in delivery.last_error


@pytest.mark.parametrize(
    "url, refusal",
    [
        ("http://127.0.0.1:6379/", "private, loopback or link-local"),
        ("https://localhost/hook", "private, loopback or link-local"),
        ("http://169.254.169.254/latest/meta-data/", "private, loopback or link-local"),
        ("http://[::1]/", "private, loopback or link-local"),
        ("file:///etc/passwd", "Give an https:// URL"),
        ("https://user:pw@example.org/", "Leave credentials out"),
        ("https://example.org/a b", "spaces or control characters"),
        ("https://example.org:99999/", "port"),
    ],
)
def test_a_webhook_into_the_portals_own_network_is_refused(settings, url, refusal):
    settings.NOTIFY_URL_ALLOW = []
    student = UserFactory()
    with pytest.raises(services.NotificationError, match=refusal):
        services.webhook_set(user=student, url=url)
    assert not Webhook.objects.filter(user=student).exists()


def test_a_webhook_whose_address_turns_private_later_is_refused_at_delivery(
    notify_settings, webhook_receiver
):
    student = UserFactory(email="")
    services.webhook_set(user=student, url=webhook_receiver.url)
    told(student)
    notify_settings.NOTIFY_URL_ALLOW = []
    assert send_all() == ["failed"]
    assert webhook_receiver.received == []
    assert "private, loopback" in Delivery.objects.get().last_error


def test_a_browser_gets_the_message_encrypted_for_it_and_signed_by_the_site(
    notify_settings, push_service
):
    student = UserFactory(email="")
    push_service.browser(student, "laptop")
    push_service.browser(student, "phone")
    told(student)
    assert send_all() == ["sent", "sent"]
    assert {m.path for m in push_service.received} == {"/push/laptop", "/push/phone"}
    for message in push_service.received:
        payload = push_service.decrypted(message)
        assert payload["title"] == "“mnist” completed"
        assert payload["url"] == "/jobs/1/"
        assert message.headers["content-encoding"] == "aes128gcm"
        assert int(message.headers["ttl"]) > 0
        # The VAPID signature verifies with the key browsers subscribed with.
        scheme, _, params = message.headers["authorization"].partition(" ")
        fields = dict(part.split("=", 1) for part in params.split(","))
        assert scheme == "vapid" and fields["k"] == services.push_public_key()
        assert Vapid02.verify(message.headers["authorization"])


def test_a_browser_the_push_service_forgot_is_forgotten(notify_settings, push_service):
    student = UserFactory(email="")
    push_service.browser(student)
    push_service.answers = [410]
    told(student)
    assert send_all() == ["failed"]
    assert not PushSubscription.objects.exists()


def test_no_browser_is_told_without_a_site_key(notify_settings, push_service, tmp_path):
    notify_settings.VAPID_PRIVATE_KEY = tmp_path / "absent.pem"
    student = UserFactory(email="")
    push_service.browser(student)
    assert told(student) == []


def test_an_email_reaches_a_real_smtp_server(notify_settings, smtp_server):
    student = UserFactory(email="ada@example.edu")
    services.preferences_set(user=student, chosen={Event.JOB_ENDED: {"email"}})
    told(student)
    assert send_all() == ["sent"]
    [envelope] = smtp_server.messages
    assert envelope.rcpt_tos == ["ada@example.edu"]
    text = envelope.content.decode()
    assert "Subject: [Nightshift] =?utf-8?" in text or "mnist" in text
    assert "https://nightshift.example.edu/jobs/1/" in text


def test_a_mail_server_that_is_down_is_tried_again(notify_settings, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", 9
    student = UserFactory(email="ada@example.edu")
    told(student, also=frozenset({"email"}))
    assert send_all() == ["retry"]


def test_the_same_occasion_is_told_once(notify_settings, webhook_receiver):
    student = UserFactory(email="")
    services.webhook_set(user=student, url=webhook_receiver.url)
    assert len(told(student)) == 1
    assert told(student) == []
    send_all()
    send_all()
    assert len(webhook_receiver.received) == 1
    assert json.loads(webhook_receiver.received[0].body)["type"] == "job.ended"


def test_a_title_with_a_line_break_stays_one_subject_line(notify_settings, smtp_server):
    student = UserFactory(email="ada@example.edu")
    services.notify(
        [
            services.Occasion(
                user=student,
                event=Event.JOB_ENDED,
                key="k",
                title="evil\r\nBcc: x@example.org",
                also=frozenset({"email"}),
            )
        ]
    )
    assert send_all() == ["sent"]
    [envelope] = smtp_server.messages
    assert envelope.rcpt_tos == ["ada@example.edu"]
    assert "Subject: [Nightshift] evil Bcc: x@example.org" in envelope.content.decode()


def test_a_damaged_site_key_turns_browsers_off_without_breaking_anything(
    notify_settings, push_service
):
    notify_settings.VAPID_PRIVATE_KEY.write_text("not a key")
    student = UserFactory(email="")
    push_service.browser(student)
    assert services.push_public_key() is None
    assert told(student) == []
