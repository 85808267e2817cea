"""Live sessions: what the portal's live proxy adds to a request to a running job's endpoint.

On the personal pool, a real job serves HTTP and a WebSocket echo on its own Unix socket
(nightshift.serve_socket(), as a model's API or a notebook does). In the same run, against
that same job:

- direct: straight to the job's socket (possible here because the personal pool's
  workstations are this machine and the bench runs as root; the floor);
- through the portal: the live proxy (uvicorn, as `make run` starts it), which checks the
  caller's live token, then HTCondor's tunnel (condor_ssh_to_job's ssh forwarding a Unix
  socket), then the job.

It prints p50 and p95 of an HTTP request (keep-alive, as a client library does) and of a
WebSocket message round trip, each way, and what opening the tunnel costs the first
request. Run with `make bench-sessions` (PostgreSQL and the personal pool must be up). The
last line reads `proxy overhead p95: X ms`.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from portal_setup import setup_django
from timing import percentile

REPO = setup_django(fake_bridge=False)

import httpx  # noqa: E402
import uvicorn  # noqa: E402
import websockets  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from condor_bridge import FileMode, JobRequest, JobState  # noqa: E402
from condor_bridge.schedd import HTCondorBridge  # noqa: E402
from jobs.staging import HELPER_FILES  # noqa: E402

REQUESTS = int(os.environ.get("NIGHTSHIFT_BENCH_REQUESTS", "400"))
POOL_ROOT = os.environ.get("NIGHTSHIFT_POOL_ROOT", "/var/lib/nightshift/pool-root")
# A job's endpoint: HTTP/1.1 keep-alive, and a WebSocket echo at /ws (RFC 6455, the
# standard library only, as a job without packages would have it).
SERVES = r"""
import base64, hashlib, http.server, os, socketserver, struct
import nightshift

class Endpoint(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One write per answer. (A Unix socket has no Nagle delay to turn off: TCP_NODELAY on
    # it is an error.)
    wbufsize = 1 << 16

    def do_GET(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            return self.echo()
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def echo(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        read = self.rfile.read
        while True:
            head = read(2)
            if len(head) < 2:
                return
            opcode, length = head[0] & 0x0F, head[1] & 0x7F
            if length == 126:
                length = struct.unpack(">H", read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", read(8))[0]
            mask = read(4) if head[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(read(length)))
            if opcode == 8:
                self.wfile.write(b"\x88\x00")
                return
            if opcode in (1, 2):
                size = len(data)
                header = bytes([0x80 | opcode]) + (bytes([size]) if size < 126
                                                   else b"\x7e" + struct.pack(">H", size))
                self.wfile.write(header + data)
                self.wfile.flush()

    def log_message(self, *args):
        pass

class OnSocket(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        connection, _ = super().get_request()
        return connection, ("job", 0)

path = nightshift.serve_socket()
print("serving on", path, flush=True)
OnSocket(path, Endpoint).serve_forever()
"""


def stage_job(job_id: str) -> Path:
    folder = settings.JOBS_DIR / f"bench-sessions-{job_id}"
    (folder / ".nightshift").mkdir(parents=True)
    (folder / "outputs").mkdir()
    # The helper folder the portal stages into every job, from the portal's own list.
    for module, name in HELPER_FILES:
        shutil.copy(module, folder / ".nightshift" / name)
    (folder / "serve.py").write_text(SERVES)
    if settings.JOB_DIR_UID is not None:
        for path in (folder, folder / ".nightshift", folder / "outputs"):
            os.chown(path, settings.JOB_DIR_UID, -1)
    return folder


def wait_for(probe, what: str, timeout: float = 180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def http_times(client: httpx.Client, url: str, headers: dict) -> list[float]:
    times = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        answer = client.get(url, headers=headers)
        times.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.text[:300]
    return times


async def websocket_times(url: str, headers: dict, socket_path: str = "") -> list[float]:
    times = []
    if socket_path:
        opening = websockets.unix_connect(socket_path, url, additional_headers=headers)
    else:
        opening = websockets.connect(url, additional_headers=headers)
    async with opening as ws:
        for number in range(REQUESTS):
            started = time.perf_counter()
            await ws.send(f"message {number}")
            assert await ws.recv() == f"message {number}"
            times.append((time.perf_counter() - started) * 1000)
    return times


def line(what: str, direct: list[float], proxied: list[float]) -> tuple[float, float]:
    d50, d95 = percentile(direct, 0.5), percentile(direct, 0.95)
    p50, p95 = percentile(proxied, 0.5), percentile(proxied, 0.95)
    print(
        f"{what:<22} direct p50 {d50:6.2f} ms  p95 {d95:6.2f} ms   through the portal "
        f"p50 {p50:6.2f} ms  p95 {p95:6.2f} ms   added p50 {p50 - d50:5.2f} ms  "
        f"p95 {p95 - d95:5.2f} ms"
    )
    return p50 - d50, p95 - d95


def main() -> None:
    setup_test_environment()
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    bridge = HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode.SHARED,
        instance=settings.NIGHTSHIFT_INSTANCE,
    )
    job_id = str(uuid.uuid4())
    folder = stage_job(job_id)
    submitted = None
    server = None
    links = Path(tempfile.mkdtemp(prefix="ns-"))
    try:
        from jobs.models import Job
        from jobs.models import JobState as PortalState
        from live_sessions.proxy import build_application
        from live_sessions.services import live_token_create

        submitted = bridge.submit(
            JobRequest(
                job_id=job_id,
                job_dir=str(folder),
                script_name="serve.py",
                memory_mb=256,
                live_services=("serve",),
            )
        )
        wait_for(lambda: (o := bridge.find(job_id)) and o.state is JobState.RUNNING, "the job")
        stdout = folder / "stdout.txt"
        inside = wait_for(
            lambda: stdout.exists() and re.search(r"serving on (/\S+)", stdout.read_text()),
            "the job to serve",
        ).group(1)
        # The path inside the job; the personal pool's workstations live under its root.
        job_socket = inside if os.path.exists(inside) else f"{POOL_ROOT}{inside}"
        if len(job_socket) > 100:
            # A Unix socket's address holds about 108 bytes; a checkout deep in the file
            # system (CI's clone, the second pool's jobs) passes that. A link is shorter.
            link = links / "job.sock"
            link.symlink_to(job_socket)
            job_socket = str(link)
        owner = get_user_model().objects.create_user("bench", password="not-used-1234")
        job = Job.objects.create(
            owner=owner,
            name="bench endpoint",
            output_dir=str(folder),
            public_id=job_id,
            state=PortalState.RUNNING,
            cluster_id=submitted.cluster_id,
            proc_id=submitted.proc_id,
            request={"live_services": ["serve"]},
        )
        _, secret = live_token_create(user=owner, job=job, name="bench")

        proxy_port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(
                build_application(),
                host="127.0.0.1",
                port=proxy_port,
                log_level="warning",
                lifespan="on",
                ws="websockets-sansio",
            )
        )
        threading.Thread(target=server.run, daemon=True).start()
        wait_for(lambda: server.started, "the live proxy")

        bearer = {"Authorization": f"Bearer {secret}"}
        proxied_url = f"http://127.0.0.1:{proxy_port}/live/{job_id}/serve/v1/models"
        with httpx.Client(timeout=60) as client:
            started = time.perf_counter()
            first = client.get(proxied_url, headers=bearer)
            opening = time.perf_counter() - started
            assert first.status_code == 200, first.text[:300]
            proxied = http_times(client, proxied_url, bearer)
        on_socket = httpx.HTTPTransport(uds=job_socket)
        with httpx.Client(transport=on_socket, timeout=60) as client:
            direct = http_times(client, "http://127.0.0.1/v1/models", {})
        ws_direct = asyncio.run(websocket_times("ws://127.0.0.1/ws", {}, job_socket))
        ws_proxied = asyncio.run(
            websocket_times(f"ws://127.0.0.1:{proxy_port}/live/{job_id}/serve/ws", bearer)
        )

        print(
            f"live sessions: {REQUESTS} requests each way, one job on the personal pool, "
            f"{os.cpu_count()} CPUs"
        )
        print(f"first request (probe the job, open HTCondor's tunnel): {opening:.2f} s")
        _, http_p95 = line("HTTP GET", direct, proxied)
        line("WebSocket round trip", ws_direct, ws_proxied)
        print(f"proxy overhead p95: {http_p95:.2f} ms")
    finally:
        if server is not None:
            server.should_exit = True
            time.sleep(1)
        if submitted is not None:
            bridge.act("remove", submitted.cluster_id, submitted.proc_id)
        connection.creation.destroy_test_db(old_name, verbosity=0)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(links, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
