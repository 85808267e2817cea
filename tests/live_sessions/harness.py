"""The live proxy for real (uvicorn, in a thread), in front of a stand-in job: an aiohttp
server on a Unix socket that answers with what it received. Only the tunnel is stood in
for; the integration tests open real ones through condor_ssh_to_job."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import uvicorn
from aiohttp import web

from live_sessions.proxy import LiveProxy
from live_sessions.tunnels import Target, TunnelError
from tests.helpers import free_port

JOB_PORT = 4242
# What a hostile served endpoint answers: headers that would act beyond its own pages, and a
# page whose script tries to reach past them, writing what it managed into the page.
HOSTILE_HEADERS = [
    ("Set-Cookie", "sessionid=attacker; Path=/"),
    ("Set-Cookie", "nslive=attacker; Path=/"),
    ("Set-Cookie", "csrftoken=attacker; Path=/; Domain=127.0.0.1"),
    ("Service-Worker-Allowed", "/"),
    ("Clear-Site-Data", '"cookies", "storage"'),
    ("Strict-Transport-Security", "max-age=31536000; includeSubDomains"),
    ("Access-Control-Allow-Origin", "https://evil.example"),
    ("Access-Control-Allow-Credentials", "true"),
    ("Content-Security-Policy", "default-src *"),
    ("X-Frame-Options", "ALLOWALL"),
    ("Alt-Svc", 'h2="evil.example:443"'),
    ("Refresh", "0; url=https://evil.example/"),
    ("X-Kept", "yes"),
]
HOSTILE_PAGE = """<!doctype html><html lang=en><title>hostile</title><main id=out></main>
<script>
const out = document.getElementById("out");
function note(what, value) { const p = document.createElement("p"); p.dataset.what = what;
  p.textContent = what + ": " + value; out.appendChild(p); }
try { document.cookie = "tossed=attacker; path=/"; note("cookie", document.cookie); }
catch (e) { note("cookie", "refused " + e.name); }
try { localStorage.setItem("x", "1"); note("storage", "written"); }
catch (e) { note("storage", "refused " + e.name); }
(async () => {
  try { await navigator.serviceWorker.register("sw.js", {scope: "/"});
        note("worker", "registered"); }
  catch (e) { note("worker", "refused " + e.name); }
  const other = new URLSearchParams(location.search).get("other");
  const url = "/live/" + other + "/notebook/api/contents";
  try { const r = await fetch(url, {credentials: "include"});
        note("other", "status " + r.status + " " + (await r.text()).slice(0, 80)); }
  catch (e) { note("other", "refused " + e.name); }
  note("done", "yes");
})();
</script></html>"""


async def _echo(request: web.Request) -> web.StreamResponse:
    if request.headers.get("Upgrade", "").lower() == "websocket":
        ws = web.WebSocketResponse(protocols=("echo",))
        await ws.prepare(request)
        async for message in ws:
            if message.type is aiohttp.WSMsgType.TEXT:
                await ws.send_str(f"echo {message.data} from {request.path}")
        return ws
    if request.path.endswith("/moved"):
        raise web.HTTPFound("/landing")
    if request.path.endswith("/hostile"):
        return web.Response(text=HOSTILE_PAGE, content_type="text/html", headers=HOSTILE_HEADERS)
    body = await request.read()
    return web.json_response(
        {
            "method": request.method,
            "path": request.path_qs,
            "body": body.decode(),
            "headers": {k.lower(): v for k, v in request.headers.items()},
        }
    )


class StandInJob:
    """What the tunnel of a job reaches: a web server on a Unix socket, in its own thread."""

    def __init__(self, folder: Path) -> None:
        self.socket = str(folder / "job.sock")
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", _echo)
        runner = web.AppRunner(app)
        self.loop.run_until_complete(runner.setup())
        self.loop.run_until_complete(web.UnixSite(runner, self.socket).start())
        self.ready.set()
        self.loop.run_forever()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


@dataclass
class StandInTunnel:
    socket: str
    sessions: dict = field(default_factory=dict)
    base_url: str = "http://127.0.0.1"

    def session(self, service: str) -> aiohttp.ClientSession:
        if service not in self.sessions:
            self.sessions[service] = aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=self.socket), auto_decompress=False
            )
        return self.sessions[service]


class StandInTunnels:
    """TunnelManager's interface; records which jobs it was asked to reach."""

    def __init__(self, job: StandInJob) -> None:
        self.job = job
        self.tunnels: dict[str, StandInTunnel] = {}
        self.connected: list[Target] = []
        self.failing = ""
        # Where the service listens inside the job: a port, or its Unix socket's path.
        self.endpoint: int | str = JOB_PORT

    async def connect(self, target: Target, service: str):
        self.connected.append(target)
        if self.failing:
            raise TunnelError(self.failing)
        tunnel = self.tunnels.setdefault(target.key, StandInTunnel(self.job.socket))
        return tunnel, self.endpoint

    async def close(self, key: str) -> None:
        self.tunnels.pop(key, None)

    async def close_all(self) -> None:
        self.tunnels.clear()

    async def reap(self, running: set[str]) -> list[str]:
        gone = [key for key in self.tunnels if key not in running]
        for key in gone:
            await self.close(key)
        return gone


def run_async(coroutine):
    """asyncio.run in a thread of its own: in a whole test session, Playwright's sync API may
    keep an event loop running in the main thread, where asyncio.run refuses to start."""
    result: dict = {}

    def run() -> None:
        try:
            result["value"] = asyncio.run(coroutine)
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "the coroutine did not finish"
    if "error" in result:
        raise result["error"]
    return result["value"]


class ProxyServer:
    def __init__(self, tunnels) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = LiveProxy(tunnels)
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
            ws="websockets-sansio",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "the live proxy did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def raw_request(port: int, request: bytes) -> tuple[int, bytes]:
    """One request exactly as written, for what no HTTP client would send."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    return status, answer.partition(b"\r\n\r\n")[2]


def seen(response) -> dict:
    """What the stand-in job received, from its answer."""
    return json.loads(response.text if hasattr(response, "text") else response)


def bound_ticket(client, user, job, service: str) -> str:
    """The ticket the portal makes for a browser (`client`, an httpx client on the proxy)
    that began at the proxy: the client keeps the binding cookie the proxy gave it."""
    from urllib.parse import parse_qs, urlsplit

    from live_sessions.services import live_ticket

    began = client.get(f"/live/{job.public_id}/{service}/_nightshift/begin")
    assert began.status_code == 302, began.text
    bind = parse_qs(urlsplit(began.headers["location"]).query)["bind"][0]
    return live_ticket(user=user, job=job, service=service, bind=bind)
