"""Django, set up for a benchmark script: this repository's settings, and an instance tag
of its own so that its jobs never mix with a portal's or a test run's."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def setup_django(*, fake_bridge: bool) -> Path:
    """Configure and start Django; returns the repository's root."""
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ["NIGHTSHIFT_INSTANCE"] = f"bench-{uuid.uuid4().hex[:8]}"
    if fake_bridge:
        os.environ["NIGHTSHIFT_BRIDGE"] = "fake"
    import django

    django.setup()
    return REPO
