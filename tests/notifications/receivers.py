"""Real receivers on 127.0.0.1 for the notification channels: an HTTP server (a webhook's
receiver, or a push service that decrypts what it is sent, as a browser would) and an
SMTP server."""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import http_ece
import pytest
from aiosmtpd.controller import Controller
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid

from tests.helpers import free_port


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """Answers each POST with the next of `answers` (then 200), keeping what came."""

    answers: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    url: str = ""

    def next_status(self) -> int:
        return self.answers.pop(0) if self.answers else 200


def _serve(receiver: Receiver, created: int):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            receiver.received.append(
                Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            status = receiver.next_status()
            self.send_response(created if status == 200 else status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    return server


@pytest.fixture
def notify_settings(settings, tmp_path):
    """The local receivers' network allowed, and a site VAPID key."""
    vapid = Vapid()
    vapid.generate_keys()
    key = tmp_path / "vapid.pem"
    key.write_bytes(vapid.private_pem())
    settings.VAPID_PRIVATE_KEY = key
    settings.NOTIFY_URL_ALLOW = [ipaddress.ip_network("127.0.0.0/8")]
    settings.PORTAL_URL = "https://nightshift.example.edu"
    return settings


@pytest.fixture
def webhook_receiver():
    receiver = Receiver()
    server = _serve(receiver, created=200)
    yield receiver
    server.shutdown()


class PushService(Receiver):
    """A push service (RFC 8030) for browsers whose keys the test holds: it answers 201
    and decrypts each message with the browser's private key, as the browser would."""

    def __init__(self):
        super().__init__()
        self.keys_by_path: dict[str, tuple[ec.EllipticCurvePrivateKey, bytes]] = {}

    def keys(self, name: str = "laptop") -> dict:
        """A browser's subscription (PushSubscription.toJSON()), its private key kept here."""
        private = ec.generate_private_key(ec.SECP256R1())
        public = private.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        auth = os.urandom(16)
        self.keys_by_path[f"/push/{name}"] = (private, auth)
        return {
            "endpoint": f"{self.url}/push/{name}",
            "keys": {
                "p256dh": base64.urlsafe_b64encode(public).decode().rstrip("="),
                "auth": base64.urlsafe_b64encode(auth).decode().rstrip("="),
            },
        }

    def browser(self, user, name: str = "laptop"):
        from notifications.models import PushSubscription

        subscription = self.keys(name)
        return PushSubscription.objects.create(
            user=user,
            endpoint=subscription["endpoint"],
            p256dh=subscription["keys"]["p256dh"],
            auth=subscription["keys"]["auth"],
            label=name,
        )

    def decrypted(self, received: Received) -> dict:
        private, auth = self.keys_by_path[received.path]
        plain = http_ece.decrypt(
            received.body, private_key=private, auth_secret=auth, version="aes128gcm"
        )
        return json.loads(plain)


@pytest.fixture
def push_service():
    service = PushService()
    server = _serve(service, created=201)
    yield service
    server.shutdown()


class Mailbox:
    def __init__(self):
        self.messages: list = []
        self.port = 0

    async def handle_DATA(self, server, session, envelope):
        self.messages.append(envelope)
        return "250 OK"


@pytest.fixture
def smtp_server(settings):
    """A real SMTP server on 127.0.0.1, which Django's SMTP backend sends to."""
    mailbox = Mailbox()
    port = free_port()
    mailbox.port = port
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = (
        "127.0.0.1",
        controller.server.sockets[0].getsockname()[1],
    )
    yield mailbox
    controller.stop()
