"""One tunnel per job whose live services someone opened: condor_ssh_to_job, kept open.

A tunnel is a long-lived `ssh -N` that condor_ssh_to_job runs, forwarding one Unix socket
per service (in a folder only the portal's account can enter, so that no other local user
of the access point reaches a job through it) to the service's own Unix socket inside the
job (or 127.0.0.1:PORT, for a served job that binds a port). Where each listens comes from
the probe, which runs inside the job first (condor_bridge.live). Tunnels close when their
job leaves Running, or after they have been idle for LIVE_IDLE_S.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from condor_bridge.live import (
    Endpoint,
    ProbeError,
    forward_command,
    parse_probe,
    probe_command,
)

log = logging.getLogger(__name__)
# A job that has just started may not listen yet: probe it again after this long, not at
# every request.
REPROBE_AFTER_S = 3.0


class TunnelError(Exception):
    """Why a service cannot be reached now, in words for its owner."""


@dataclass(frozen=True)
class Target:
    """Which job, as the schedd knows it, and the Python to run the probe with."""

    key: str  # the job's public id
    cluster_id: int
    proc_id: int
    python: str = "/usr/bin/python3"
    schedd: str = ""  # the job's schedd; "": the default one
    # A notebook's Jupyter token, which the proxy adds to each request it lets in.
    secret: str = field(default="", repr=False)


@dataclass
class Tunnel:
    target: Target
    endpoints: dict[str, Endpoint]  # where each service listens inside the job
    sockets: dict[str, str]
    process: asyncio.subprocess.Process
    stderr: collections.deque = field(default_factory=lambda: collections.deque(maxlen=20))
    last_used: float = field(default_factory=time.monotonic)
    sessions: dict[str, aiohttp.ClientSession] = field(default_factory=dict)
    reader: asyncio.Task | None = None

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    @property
    def base_url(self) -> str:
        return "http://127.0.0.1"  # the socket decides where; HTTP needs a host

    def session(self, service: str) -> aiohttp.ClientSession:
        """Pooled HTTP connections through this tunnel's socket for `service`."""
        if service not in self.sessions:
            self.sessions[service] = upstream_session(
                aiohttp.UnixConnector(path=self.sockets[service])
            )
        return self.sessions[service]

    async def close(self) -> None:
        await stop(self.process, self.sessions)
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.reader
        for path in self.sockets.values():
            with contextlib.suppress(OSError):
                os.unlink(path)


class TunnelManager:
    def __init__(
        self,
        *,
        ssh_to_job: list[str],
        folder: Path,
        idle_s: float = 900.0,
        open_timeout_s: float = 60.0,
        folder_owner_uid: int | None = None,
    ) -> None:
        self.ssh_to_job = list(ssh_to_job)
        self.folder = Path(folder)
        self.idle_s = idle_s
        self.open_timeout_s = open_timeout_s
        self.folder_owner_uid = folder_owner_uid
        self.tunnels: dict[str, Tunnel] = {}
        self._locks: dict[str, asyncio.Lock] = collections.defaultdict(asyncio.Lock)
        self._probed_at: dict[str, float] = {}

    def _prepare_folder(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        if self.folder_owner_uid is not None and os.geteuid() == 0:
            # The personal pool's ssh runs as its "portal" account and makes the sockets.
            os.chown(self.folder, self.folder_owner_uid, -1)

    async def connect(self, target: Target, service: str) -> tuple[Tunnel, Endpoint]:
        """The open tunnel that reaches `service` of the job, and where it listens there."""
        tunnel = self.tunnels.get(target.key)
        if tunnel and tunnel.alive and service in tunnel.sockets:
            tunnel.last_used = time.monotonic()
            return tunnel, tunnel.endpoints[service]
        async with self._locks[target.key]:
            tunnel = self.tunnels.get(target.key)
            if tunnel and tunnel.alive and service in tunnel.sockets:
                tunnel.last_used = time.monotonic()
                return tunnel, tunnel.endpoints[service]
            since = time.monotonic() - self._probed_at.get(target.key, -1e9)
            if tunnel and tunnel.alive and since < REPROBE_AFTER_S:
                raise TunnelError(not_listening(service))
            endpoints = await self._probe(target)
            if service not in endpoints:
                raise TunnelError(not_listening(service))
            if tunnel is not None:
                await self.close(target.key)
            tunnel = await self._open(target, endpoints)
            self.tunnels[target.key] = tunnel
            return tunnel, tunnel.endpoints[service]

    async def _run(self, command: list[str], timeout: float) -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            signal_group(process, signal.SIGKILL)
            await process.wait()
            raise TunnelError("HTCondor did not open a connection to the job in time") from None
        return process.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")

    async def _probe(self, target: Target) -> dict[str, Endpoint]:
        self._probed_at[target.key] = time.monotonic()
        command = probe_command(
            self.ssh_to_job,
            target.cluster_id,
            target.proc_id,
            python=target.python,
            schedd=target.schedd,
        )
        status, out, err = await self._run(command, self.open_timeout_s)
        if status:
            log.warning("probing job %s failed (%s): %s", target.key, status, err.strip()[-500:])
            raise TunnelError(f"HTCondor could not reach the job: {last_line(err)}")
        try:
            return parse_probe(out)
        except ProbeError as exc:
            log.warning("probing job %s: %s; stderr %s", target.key, exc, err.strip()[-500:])
            raise TunnelError(f"HTCondor could not reach the job: {last_line(err)}") from None

    async def _open(self, target: Target, endpoints: dict[str, Endpoint]) -> Tunnel:
        self._prepare_folder()
        sockets = {s: str(self.folder / f"{secrets.token_hex(6)}.sock") for s in endpoints}
        command = forward_command(
            self.ssh_to_job,
            target.cluster_id,
            target.proc_id,
            {sockets[s]: endpoint for s, endpoint in endpoints.items()},
            schedd=target.schedd,
        )
        # Its own process group: a wrapper (the personal pool's chroot, runuser) does not
        # pass signals on, so closing the tunnel signals every process in it.
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        tunnel = Tunnel(target=target, endpoints=dict(endpoints), sockets=sockets, process=process)
        tunnel.reader = asyncio.get_running_loop().create_task(_drain(process, tunnel.stderr))
        deadline = time.monotonic() + self.open_timeout_s
        while time.monotonic() < deadline:
            if not tunnel.alive:
                await asyncio.sleep(0.1)  # the last of its stderr
                await tunnel.close()
                reason = tunnel.stderr[-1] if tunnel.stderr else f"exit {process.returncode}"
                raise TunnelError(f"HTCondor's tunnel to the job closed: {reason}")
            if all([await _accepts(path) for path in sockets.values()]):
                log.info("tunnel to job %s open: %s", target.key, endpoints)
                return tunnel
            await asyncio.sleep(0.1)
        await tunnel.close()
        raise TunnelError("HTCondor did not open the tunnel to the job in time")

    async def close(self, key: str) -> None:
        tunnel = self.tunnels.pop(key, None)
        if tunnel is not None:
            await tunnel.close()
            log.info("tunnel to job %s closed", key)

    async def close_all(self) -> None:
        for key in list(self.tunnels):
            await self.close(key)

    async def reap(self, running: set[str]) -> list[str]:
        """Closes the tunnels of jobs that no longer run, and those idle for too long."""
        now = time.monotonic()
        closing = {}
        for key, tunnel in self.tunnels.items():
            if key not in running:
                closing[key] = "the job is no longer running"
            elif not tunnel.alive:
                closing[key] = f"its ssh ended: {tunnel.stderr[-1] if tunnel.stderr else '-'}"
            elif now - tunnel.last_used > self.idle_s:
                closing[key] = f"idle for {now - tunnel.last_used:.0f} s"
        for key, reason in closing.items():
            log.info("closing the tunnel to job %s: %s", key, reason)
            await self.close(key)
        return list(closing)


def not_listening(service: str) -> str:
    if service == "tensorboard":
        return (
            "The job is not running TensorBoard (yet). It starts with the job when "
            "tensorboard is in the job's environment; its log is "
            ".nightshift/tensorboard.log."
        )
    return (
        "The job is not listening (yet): it must serve HTTP on the Unix socket "
        "$NIGHTSHIFT_SERVE_SOCKET (nightshift.serve_socket()), or on "
        "127.0.0.1:$NIGHTSHIFT_SERVE_PORT (nightshift.serve_port())."
    )


def last_line(text: str) -> str:
    """HTCondor's reason, without its advice on command-line options."""
    lines = [
        line.strip()
        for line in text.strip().splitlines()
        if line.strip() and not line.strip().startswith("(Use -")
    ]
    return lines[-1][:300] if lines else "no reason given"


def upstream_session(connector: aiohttp.BaseConnector | None = None) -> aiohttp.ClientSession:
    """Pooled connections to one service: bytes as sent, no cookies kept, no overall limit
    (a kernel's WebSocket and a streamed answer last as long as they last)."""
    return aiohttp.ClientSession(
        connector=connector,
        auto_decompress=False,
        cookie_jar=aiohttp.DummyCookieJar(),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
    )


async def stop(process: asyncio.subprocess.Process, sessions: dict) -> None:
    """Closes the sessions to a service, then its process group: SIGTERM, SIGKILL after 5 s."""
    for session in sessions.values():
        await session.close()
    sessions.clear()
    signal_group(process, signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), 5)
    except TimeoutError:
        signal_group(process, signal.SIGKILL)
        await process.wait()


def signal_group(process: asyncio.subprocess.Process, number: int) -> None:
    """Every process the command started (it leads its own group), even once it exited."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, number)


async def _drain(process: asyncio.subprocess.Process, into: collections.deque) -> None:
    assert process.stderr is not None
    async for line in process.stderr:
        into.append(line.decode(errors="replace").strip())


async def _accepts(path: str) -> bool:
    if not os.path.exists(path):
        return False
    try:
        _, writer = await asyncio.open_unix_connection(path)
    except OSError:
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
