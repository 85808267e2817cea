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
    template = os.environ.get("NIGHTSHIFT_BENCH_DATABASE_TEMPLATE")
    if template:
        # A migrated database to copy rather than migrating a new one: the quick benchmarks'
        # tests make one for all of them (a migration each was a quarter of their time).
        from django.db import connection

        connection.settings_dict["TEST"]["TEMPLATE"] = template
    return REPO


def serve_gunicorn(port: int, *extra: str, app: str = "portal.wsgi"):
    """gunicorn as `make run` starts it (2 workers of 4 threads) on the test database the
    benchmark made, with the fake bridge; returns once it answers. `app` serves another WSGI
    app the same way (a floor to measure against)."""
    import subprocess
    import time

    import httpx
    from django.db import connection

    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    env = os.environ | {
        "DATABASE_URL": f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "NIGHTSHIFT_BRIDGE": "fake",
    }
    process = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gunicorn")),
            app,
            "-b",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--threads",
            "4",
            "--log-level",
            "warning",
            *extra,
        ],
        cwd=REPO,
        env=env,
    )
    for _ in range(100):
        try:
            httpx.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=1)
            return process
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit("gunicorn did not start")
