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


class Gunicorn:
    """A gunicorn serving on a port of 127.0.0.1 that this process bound and handed over, so
    that nothing else on the machine can hold it: a fixed port was once taken by another
    process during a test run and the bench failed."""

    def __init__(self, process, port: int) -> None:
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def serve_gunicorn(*extra: str, app: str = "portal.wsgi") -> Gunicorn:
    """gunicorn as `make run` starts it (2 workers of 4 threads) on the test database the
    benchmark made, with the fake bridge, on a free port; returns once it answers. `app`
    serves another WSGI app the same way (a floor to measure against)."""
    import socket
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
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        port = listener.getsockname()[1]
        process = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("gunicorn")),
                app,
                "-b",
                f"fd://{listener.fileno()}",
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
            pass_fds=[listener.fileno()],
        )
    server = Gunicorn(process, port)
    for _ in range(150):
        if process.poll() is not None:
            raise SystemExit(f"gunicorn exited with {process.returncode} before it answered")
        try:
            httpx.get(f"{server.url}/accounts/login/", timeout=1)
            return server
        except httpx.TransportError:
            time.sleep(0.2)
    server.stop()
    raise SystemExit("gunicorn did not answer within 30 s")
