"""The live proxy: an ASGI application (uvicorn) for /live/<job>/<service>/..., HTTP and
WebSocket, in front of the tunnels.

Who gets in: a browser that the portal sent with a ticket (the proxy then sets its own
cookie, scoped to the job's path), or a program with a live token (`Authorization: Bearer
nsl_...`, the served endpoint only). Each request is checked against the database (for a
few seconds, the answer is remembered): the job's owner, or the leads of its lab and the
admins when the owner shared it. Everyone else, and every path that is not exactly a job's
service, gets 404. The upstream is only ever the tunnel of the job the path names: nothing
in the request (Host, X-Forwarded-*, an absolute URL, an encoded path) chooses another.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, unquote

import aiohttp
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connections
from django.urls import reverse

from .access import (
    Decision,
    access_cookie_user,
    access_decide,
    access_enter,
    access_running_jobs,
    service_name,
)
from .boards import Boards, LocalTarget, tensorboard_program
from .origins import host_allowed, origin_allowed, origin_of, response_headers
from .services import bind_digest
from .tunnels import TunnelError, TunnelManager

log = logging.getLogger(__name__)

COOKIE = "nslive"
ENTER = "/_nightshift/enter"
# A browser's way in starts here: the proxy gives it a secret (BIND_COOKIE) and sends it to
# the portal with the secret's digest, which the portal writes into the ticket it makes.
BEGIN = "/_nightshift/begin"
BIND_COOKIE = "nsbind"
BIND_MAX_AGE_S = 300
# The portal's own cookies never reach a job.
PORTAL_COOKIES = {COOKIE, BIND_COOKIE, "sessionid", "csrftoken"}
_PREFIX = re.compile(
    r"/live/(?P<job>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"/(?P<service>[a-z]{1,20})(?P<rest>/[^?#]*)?"
)
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "authorization",
    "cookie",
    "forwarded",
    "x-real-ip",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-extensions",
    "sec-websocket-protocol",
    "sec-websocket-accept",
}
MAX_BODY_BYTES = 64 * 1024 * 1024
DECISION_TTL_S = 5.0
# An open WebSocket is asked about again this often: revoking, unsharing, a password
# change or the job's end closes it.
RECHECK_S = 5.0


@dataclass(frozen=True)
class Route:
    public_id: str
    service: str
    rest: str  # the path after the service, "" when there is none
    query: str

    @property
    def prefix(self) -> str:
        return f"/live/{self.public_id}/{self.service}"

    def upstream_path(self) -> str:
        """The served endpoint sees its own paths (the prefix is in X-Forwarded-Prefix);
        TensorBoard and Jupyter are told their prefix, and see it."""
        path = (self.rest or "/") if self.service == "serve" else self.prefix + self.rest
        return path + (f"?{self.query}" if self.query else "")


def route_of(scope: dict) -> Route | None:
    """The job and service a request is for, from the path exactly as sent; None for any
    path that is not plainly one (encoded characters in the prefix, dot segments, ...)."""
    raw = scope.get("raw_path") or scope.get("path", "").encode()
    try:
        path = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    path = path.partition("?")[0]
    found = _PREFIX.fullmatch(path)
    if not found:
        return None
    rest = found.group("rest") or ""
    # Decoded as the job's service would decode it: no dot segments, however spelled.
    plain = unquote(rest)
    if "\\" in plain or "\x00" in plain or {".", ".."} & set(plain.split("/")):
        return None
    query = scope.get("query_string", b"").decode("latin-1")
    return Route(found.group("job"), found.group("service"), rest, query)


def database(function: Callable) -> Callable:
    """A read the proxy makes, as a Django request would: on a connection that is at most
    CONN_MAX_AGE old and healthy, in sync_to_async's one thread."""

    def read(*args, **kwargs):
        close_old_connections()
        return function(*args, **kwargs)

    return sync_to_async(read)


def headers_of(scope: dict) -> list[tuple[str, str]]:
    return [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]


def cookies_of(headers: list[tuple[str, str]]) -> SimpleCookie:
    jar: SimpleCookie = SimpleCookie()
    for name, value in headers:
        if name == "cookie":
            with contextlib.suppress(Exception):
                jar.load(value)
    return jar


def cookie_values(headers: list[tuple[str, str]], name: str) -> list[str]:
    """Every value a cookie of this name has in the request (a browser may send several
    of one name, for different domains or paths), at most 10."""
    values = []
    for header, value in headers:
        if header != "cookie":
            continue
        for pair in value.split(";"):
            key, sep, found = pair.strip().partition("=")
            if sep and key == name and found:
                values.append(found.strip('"'))
    return values[:10]


def first_cookie_user(public_id: str, values: list[str]) -> int | None:
    for value in values:
        user_id = access_cookie_user(public_id, value)
        if user_id is not None:
            return user_id
    return None


def upstream_headers(
    headers: list[tuple[str, str]], route: Route, endpoint: int | str, secret: str = ""
) -> dict[str, str]:
    """The client's headers less what could change the upstream or carry the portal's
    credentials, plus what the app needs to know where it is served (and a notebook's
    token, which its user never handles). `endpoint` is where the app listens in the job:
    a port of its loopback, or a Unix socket (its Host is then the loopback's, no port)."""
    host = f"127.0.0.1:{endpoint}" if isinstance(endpoint, int) else "127.0.0.1"
    forwarded: dict[str, str] = {}
    for name, value in headers:
        if name in HOP_BY_HOP or name.startswith(("x-forwarded-", "x-nightshift-")):
            continue
        if name == "origin":
            # Checked above (origin_allowed); the app sees itself as the origin.
            value = f"http://{host}"
        forwarded[name] = f"{forwarded[name]}, {value}" if name in forwarded else value
    jar = cookies_of(headers)
    kept = "; ".join(f"{k}={m.coded_value}" for k, m in jar.items() if k not in PORTAL_COOKIES)
    if kept:
        forwarded["cookie"] = kept
    forwarded["host"] = host
    forwarded["x-forwarded-proto"] = "https" if settings.HTTPS else "http"
    forwarded["x-forwarded-prefix"] = route.prefix
    if secret:
        forwarded["authorization"] = f"token {secret}"
    return forwarded


class LiveProxy:
    def __init__(
        self,
        manager: TunnelManager,
        *,
        boards: Boards | None = None,
        reap_every_s: float = 15.0,
        recheck_every_s: float = RECHECK_S,
    ) -> None:
        self.manager = manager
        # Finished jobs' TensorBoards, run here.
        self.boards = boards or Boards(
            program=tensorboard_program(settings.LIVE_TENSORBOARD), idle_s=settings.LIVE_IDLE_S
        )
        self.reap_every_s = reap_every_s
        self.recheck_every_s = recheck_every_s
        self._decisions: dict[tuple, tuple[float, Decision]] = {}
        self._reaper: asyncio.Task | None = None

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
        elif scope["type"] == "http":
            await self.http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self.websocket(scope, receive, send)

    async def lifespan(self, receive: Callable, send: Callable) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._reaper = asyncio.get_running_loop().create_task(self.reap_forever())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._reaper:
                    self._reaper.cancel()
                await self.manager.close_all()
                await self.boards.close_all()
                await sync_to_async(connections.close_all)()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def reap_forever(self) -> None:
        while True:
            await asyncio.sleep(self.reap_every_s)
            with contextlib.suppress(Exception):
                await self.reap()

    async def reap(self) -> list[str]:
        keys = list(self.manager.tunnels)
        running = await database(access_running_jobs)(keys) if keys else set()
        return [*await self.manager.reap(running), *await self.boards.reap()]

    async def decide(
        self, route: Route, headers: list[tuple[str, str]], *, fresh: bool = False
    ) -> Decision:
        token = None
        for name, value in headers:
            if name == "authorization" and value.lower().startswith("bearer "):
                token = value[7:].strip()
        user_id = None
        if token is None:
            # Every cookie of the name is tried: a page of another job's host (a sibling
            # of this one) can add one for this path, and must not hide the real one.
            values = cookie_values(headers, COOKIE)
            if not values:
                return Decision(404)
            user_id = await database(first_cookie_user)(route.public_id, values)
            if user_id is None:
                return Decision(404)
        key = (route.public_id, route.service, user_id, token)
        now = time.monotonic()
        remembered = self._decisions.get(key)
        if remembered and now - remembered[0] < DECISION_TTL_S and not fresh:
            return remembered[1]
        decision = await database(access_decide)(
            route.public_id, route.service, user_id=user_id, token=token
        )
        if len(self._decisions) > 10_000:
            self._decisions.clear()
        self._decisions[key] = (now, decision)
        return decision

    async def reach(self, target, service: str):
        """The way to the service: the job's tunnel, or (a finished job's TensorBoard) the
        TensorBoard this process runs on its kept event files."""
        if isinstance(target, LocalTarget):
            return await self.boards.connect(target, service)
        return await self.manager.connect(target, service)

    def forget(self, public_id: str) -> None:
        for key in [key for key in self._decisions if key[0] == public_id]:
            self._decisions.pop(key, None)

    # HTTP

    async def http(self, scope: dict, receive: Callable, send: Callable) -> None:
        route = route_of(scope)
        headers = headers_of(scope)
        if route is None or not host_allowed(headers, route.public_id):
            return await page(send, 404, NOT_FOUND)
        if route.rest == BEGIN:
            return await self.begin(route, send)
        if route.rest == ENTER:
            return await self.enter(route, headers, send)
        if route.rest == "" and scope["method"] in ("GET", "HEAD"):
            return await redirect(send, route.prefix + "/")
        decision = await self.decide(route, headers)
        if decision.status != 200:
            message = NOT_FOUND if decision.status == 404 else decision.message
            return await page(send, decision.status, message)
        if not origin_allowed(headers, route.public_id):
            return await page(send, 403, "A page elsewhere cannot use a live session.")
        body = await read_body(receive)
        if body is None:
            return await page(send, 413, "The request is too large for the live proxy.")
        assert decision.target is not None
        try:
            tunnel, endpoint = await self.reach(decision.target, route.service)
        except TunnelError as exc:
            self.forget(route.public_id)  # the job may have just stopped: ask again
            return await page(send, 503, str(exc), retry=True)
        session = tunnel.session(route.service)
        try:
            async with session.request(
                scope["method"],
                tunnel.base_url + route.upstream_path(),
                headers=upstream_headers(headers, route, endpoint, decision.target.secret),
                data=body or None,
                allow_redirects=False,
            ) as upstream:
                await send(
                    {
                        "type": "http.response.start",
                        "status": upstream.status,
                        "headers": response_headers(
                            upstream.raw_headers, service=route.service, prefix=route.prefix
                        ),
                    }
                )
                async for chunk in upstream.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
        except (aiohttp.ClientError, OSError) as exc:
            log.info("job %s %s did not answer: %s", route.public_id, route.service, exc)
            await self.manager.close(route.public_id)
            self.forget(route.public_id)
            return await page(
                send,
                502,
                f"The job's {service_name(route.service)} did not answer. Try again "
                "in a moment; if it keeps failing, look at the job's log.",
                retry=True,
            )

    async def begin(self, route: Route, send: Callable) -> None:
        """A secret for this browser alone, and on to the portal, which makes a ticket
        bound to it (live_sessions.services.live_ticket)."""
        secret = secrets.token_urlsafe(32)
        opened = reverse("live:open", args=[route.public_id, route.service])
        location = f"{origin_of(settings.PORTAL_URL)}{opened}?bind={bind_digest(secret)}"
        secure = "; Secure" if settings.HTTPS else ""
        set_cookie = (
            f"{BIND_COOKIE}={secret}; Path={route.prefix}/_nightshift/; HttpOnly; "
            f"SameSite=Lax; Max-Age={BIND_MAX_AGE_S}{secure}"
        )
        await redirect(send, location, [(b"set-cookie", set_cookie.encode())])

    async def enter(self, route: Route, headers: list[tuple[str, str]], send: Callable) -> None:
        # The ticket is in the query of this one request: the portal's redirect; the
        # binding secret in the cookie the proxy gave this browser at BEGIN.
        ticket = (parse_qs(route.query).get("ticket") or [""])[0]
        bound = cookies_of(headers).get(BIND_COOKIE)
        user_id, cookie = await database(access_enter)(
            route.public_id, route.service, ticket, bound.value if bound else ""
        )
        if user_id is None:
            return await page(send, 404, NOT_FOUND)
        secure = "; Secure" if settings.HTTPS else ""
        age = settings.LIVE_COOKIE_MAX_AGE_S
        set_cookie = (
            f"{COOKIE}={cookie}; Path=/live/{route.public_id}/; HttpOnly; "
            f"SameSite=Lax; Max-Age={age}{secure}"
        )
        spent = f"{BIND_COOKIE}=; Path={route.prefix}/_nightshift/; Max-Age=0{secure}"
        await redirect(
            send,
            route.prefix + "/",
            [(b"set-cookie", set_cookie.encode()), (b"set-cookie", spent.encode())],
        )

    # WebSocket

    async def websocket(self, scope: dict, receive: Callable, send: Callable) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        route = route_of(scope)
        headers = headers_of(scope)
        if route is not None and not host_allowed(headers, route.public_id):
            route = None
        decision = await self.decide(route, headers) if route else Decision(404)
        if decision.status != 200 or route is None:
            return await refuse_websocket(scope, send, decision.status)
        if not origin_allowed(headers, route.public_id):
            return await refuse_websocket(scope, send, 403)
        assert decision.target is not None
        try:
            tunnel, endpoint = await self.reach(decision.target, route.service)
        except TunnelError:
            return await refuse_websocket(scope, send, 503)
        session = tunnel.session(route.service)
        try:
            upstream = await session.ws_connect(
                tunnel.base_url + route.upstream_path(),
                headers=upstream_headers(headers, route, endpoint, decision.target.secret),
                protocols=tuple(scope.get("subprotocols") or ()),
                autoping=False,
                max_msg_size=0,
            )
        except (aiohttp.ClientError, OSError):
            return await refuse_websocket(scope, send, 502)
        await send({"type": "websocket.accept", "subprotocol": upstream.protocol})
        await pump(
            receive, send, upstream, still_allowed=lambda: self.still_allowed(route, headers)
        )

    async def still_allowed(self, route: Route, headers: list[tuple[str, str]]) -> None:
        """Returns once the user may no longer reach the service (the pump then closes
        the socket): checked every recheck_every_s, past the remembered decisions."""
        while True:
            await asyncio.sleep(self.recheck_every_s)
            with contextlib.suppress(Exception):
                if (await self.decide(route, headers, fresh=True)).status != 200:
                    return


async def pump(
    receive: Callable, send: Callable, upstream, still_allowed: Callable | None = None
) -> None:
    async def client_to_upstream() -> None:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                await upstream.close()
                return
            if message.get("text") is not None:
                await upstream.send_str(message["text"])
            elif message.get("bytes") is not None:
                await upstream.send_bytes(message["bytes"])

    async def upstream_to_client() -> None:
        async for frame in upstream:
            if frame.type is aiohttp.WSMsgType.TEXT:
                await send({"type": "websocket.send", "text": frame.data})
            elif frame.type is aiohttp.WSMsgType.BINARY:
                await send({"type": "websocket.send", "bytes": frame.data})
            elif frame.type is aiohttp.WSMsgType.PING:
                await upstream.pong(frame.data)
        with contextlib.suppress(Exception):
            await send({"type": "websocket.close", "code": upstream.close_code or 1000})

    tasks = [
        asyncio.ensure_future(client_to_upstream()),
        asyncio.ensure_future(upstream_to_client()),
    ]
    watch = asyncio.ensure_future(still_allowed()) if still_allowed else None
    done, pending = await asyncio.wait(
        [*tasks, *([watch] if watch else [])], return_when=asyncio.FIRST_COMPLETED
    )
    for task in pending:
        task.cancel()
    if watch in done:
        # 4403: the portal took the user's access away while the socket was open.
        with contextlib.suppress(Exception):
            await send({"type": "websocket.close", "code": 4403})
    with contextlib.suppress(Exception):
        await upstream.close()


async def read_body(receive: Callable) -> bytes | None:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


NOT_FOUND = (
    "Nothing is here. If this is your job's, open it from the job's page in the "
    "portal: the link there lets you in."
)


TITLES = {
    403: "Refused",
    404: "Not found",
    413: "Too large",
    502: "No answer",
    503: "Not available",
}


async def page(send: Callable, status: int, message: str, *, retry: bool = False) -> None:
    refresh = '<meta http-equiv="refresh" content="5">' if retry else ""
    title = TITLES.get(status, str(status))
    body = (
        f"<!doctype html><html lang=en><meta charset=utf-8>{refresh}<title>Nightshift live: "
        f'{status}</title><main style="font: 16px system-ui; max-width: 40rem; margin: 3rem auto">'
        f"<h1>{title}</h1><p>{html.escape(message)}</p>"
        + ("<p><small>This page tries again every 5 seconds.</small></p>" if retry else "")
        + "</main></html>"
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                (b"x-content-type-options", b"nosniff"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def redirect(send: Callable, location: str, extra: list | None = None) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 302,
            "headers": [
                (b"location", location.encode()),
                (b"content-length", b"0"),
                (b"cache-control", b"no-store"),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})


async def refuse_websocket(scope: dict, send: Callable, status: int) -> None:
    if "websocket.http.response" in scope.get("extensions", {}):
        body = NOT_FOUND.encode() if status == 404 else b"not available"
        await send(
            {
                "type": "websocket.http.response.start",
                "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")],
            }
        )
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 4000 + status})


Application = Callable[[dict, Callable, Callable], Awaitable[None]]


def build_application() -> LiveProxy:
    manager = TunnelManager(
        ssh_to_job=settings.LIVE_SSH_TO_JOB,
        folder=settings.LIVE_TUNNEL_DIR,
        idle_s=settings.LIVE_IDLE_S,
        folder_owner_uid=settings.JOB_DIR_UID,
    )
    return LiveProxy(manager, reap_every_s=settings.LIVE_REAP_S)
