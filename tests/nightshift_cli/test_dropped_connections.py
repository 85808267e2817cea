"""A server closes an idle kept-alive connection when it likes, and a request sent on it
just then meets a reset. The CLI sends a request that changes nothing once more, on a new
connection; a submission is never sent twice."""

from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from accounts import services as account_services
from nightshift_cli.client import ApiError, Client
from nightshift_cli.common import POLL_SECONDS
from tests.helpers import free_port, wait_for
from tests.pipeline import database_url

REPO = Path(__file__).resolve().parents[2]
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))
BODY = b'{"ok": true}'
ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n" % len(BODY)
    + b"Connection: keep-alive\r\n\r\n"
    + BODY
)


class ResetsReusedConnections:
    """Answers the first request on each connection and resets the connection when a
    second one arrives on it: a server whose keep-alive ran out at that very moment."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.answered = 0
        self.resets = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    @staticmethod
    def _read_request(connection: socket.socket) -> bool:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = connection.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        missing = int(length.group(1)) - len(body) if length else 0
        while missing > 0:
            missing -= len(connection.recv(missing))
        return True

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            if not self._read_request(connection):
                return
            # Counted before it is sent: the client may read the count as soon as it has it.
            self.answered += 1
            connection.sendall(ANSWER)
            if self._read_request(connection):
                # SO_LINGER 0: close with a reset, not a polite end of stream.
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.resets += 1

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def resetting_server():
    server = ResetsReusedConnections()
    yield server
    server.close()


def test_a_read_on_a_connection_the_server_dropped_is_sent_again(resetting_server):
    client = Client(resetting_server.url, "token")
    assert client.get("/jobs/") == {"ok": True}
    assert client.get("/jobs/") == {"ok": True}
    client.close()
    assert (resetting_server.resets, resetting_server.answered) == (1, 2)


def test_a_submission_on_a_dropped_connection_is_not_sent_twice(resetting_server):
    client = Client(resetting_server.url, "token")
    assert client.post("/jobs/", json={"name": "a"}) == {"ok": True}
    with pytest.raises(ApiError, match="Cannot reach Nightshift") as refused:
        client.post("/jobs/", json={"name": "b"})
    client.close()
    assert refused.value.code == "unreachable"
    assert (resetting_server.resets, resetting_server.answered) == (1, 1)


@pytest.fixture
def gunicorn_with_a_short_keep_alive(transactional_db):
    """The portal under gunicorn as `make run` starts it, but with a keep-alive of 1 s."""
    port = free_port()
    environment = os.environ | {"DATABASE_URL": database_url()}
    server = subprocess.Popen(
        [
            GUNICORN,
            "portal.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--threads",
            "2",
            "--keep-alive",
            "1",
        ],
        cwd=REPO,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def answers() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    wait_for(answers, timeout=60, what="gunicorn")
    yield f"http://127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=30)


def test_polling_at_the_servers_keep_alive_limit_never_fails(
    gunicorn_with_a_short_keep_alive, student
):
    token = account_services.token_create(user=student, name="poll").secret
    client = Client(gunicorn_with_a_short_keep_alive, token)
    for _ in range(8):
        assert client.get("/me/")["username"] == "student"
        time.sleep(1.0)  # just as gunicorn closes the idle connection
    client.close()


def test_make_run_keeps_idle_connections_open_longer_than_the_cli_polls():
    run = (REPO / "deploy/dev/run").read_text()
    keep_alive = int(re.search(r"--keep-alive (\d+)", run).group(1))
    assert keep_alive > 10 * POLL_SECONDS
