"""Make the site's VAPID key (browser notifications) if it has none: `make run` runs it."""

from __future__ import annotations

import os

from django.conf import settings
from django.core.management.base import BaseCommand
from py_vapid import Vapid

from notifications.services import push_public_key


class Command(BaseCommand):
    help = "Write a new VAPID private key to NIGHTSHIFT_VAPID_PRIVATE_KEY unless one is there."

    def handle(self, *args, **options) -> None:
        path = settings.VAPID_PRIVATE_KEY
        if not path.exists():
            vapid = Vapid()
            vapid.generate_keys()
            path.parent.mkdir(parents=True, exist_ok=True)
            # Readable by the portal's account alone, from the moment it exists.
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as out:
                out.write(vapid.private_pem())
            self.stdout.write(f"Wrote a new VAPID key to {path}.")
        self.stdout.write(f"Browsers subscribe with the public key {push_public_key()}")
