"""TensorBoard for a job that has ended, on the event files kept in its outputs: run by the
live proxy itself, on the portal's host, one process per job while someone looks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shutil
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from .tunnels import TunnelError, stop, upstream_session

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LocalTarget:
    """A finished job's event files, which TensorBoard reads here."""

    key: str  # the job's public id
    logdir: Path
    secret: str = ""


def tensorboard_program(configured: str = "") -> str | None:
    """NIGHTSHIFT_LIVE_TENSORBOARD, else the tensorboard installed beside the portal."""
    if configured:
        return configured
    beside = Path(sys.executable).with_name("tensorboard")
    return str(beside) if beside.is_file() else shutil.which("tensorboard")


@dataclass
class Board:
    target: LocalTarget
    port: int
    process: asyncio.subprocess.Process
    last_used: float = field(default_factory=time.monotonic)
    sessions: dict[str, aiohttp.ClientSession] = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def session(self, service: str) -> aiohttp.ClientSession:
        if service not in self.sessions:
            self.sessions[service] = upstream_session()
        return self.sessions[service]

    async def close(self) -> None:
        await stop(self.process, self.sessions)


# Before 2.21, TensorBoard's projector plugin opened any absolute metadata_path that a
# projector_config.pbtxt in the log folder names: a job could make the portal's
# TensorBoard read the portal's own secrets. An older one is never started.
SAFE_TENSORBOARD = (2, 21)


def version_tuple(text: str) -> tuple[int, ...] | None:
    found = re.match(r"\s*(\d+)\.(\d+)", text)
    return (int(found[1]), int(found[2])) if found else None


class Boards:
    def __init__(self, *, program: str | None, idle_s: float, start_timeout_s: float = 90):
        self.program = program
        self.idle_s = idle_s
        self.start_timeout_s = start_timeout_s
        self.running: dict[str, Board] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._checked: dict[str, str] = {}  # program: "" when safe, else why not

    async def refusal(self, program: str) -> str:
        """Why this TensorBoard must not run jobs' folders ("" when it may), asked once."""
        if program not in self._checked:
            try:
                process = await asyncio.create_subprocess_exec(
                    program,
                    "--version_tb",
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.DEVNULL,
                )
                out, _ = await asyncio.wait_for(process.communicate(), self.start_timeout_s)
                version = version_tuple(out.decode(errors="replace"))
            except (OSError, TimeoutError):
                version = None
            wanted = ".".join(map(str, SAFE_TENSORBOARD))
            if version is None:
                why = f"The portal could not tell which TensorBoard {program} is."
            elif version < SAFE_TENSORBOARD:
                why = (
                    f"The TensorBoard beside the portal is {'.'.join(map(str, version))}, which "
                    "lets a job's files make it read the portal's own; it needs "
                    f"{wanted} or newer. Ask the admins to upgrade it."
                )
            else:
                why = ""
            self._checked[program] = why
        return self._checked[program]

    async def connect(self, target: LocalTarget, service: str = "tensorboard") -> tuple[Board, int]:
        board = self.running.get(target.key)
        if board and board.alive:
            board.last_used = time.monotonic()
            return board, board.port
        if not self.program:
            raise TunnelError(
                "The job has ended. Its event files are kept in its outputs (under "
                "tensorboard/), and this portal shows them once tensorboard is installed "
                "beside it: ask the admins, or download them and run TensorBoard yourself."
            )
        refusal = await self.refusal(self.program)
        if refusal:
            raise TunnelError(refusal)
        async with self._locks.setdefault(target.key, asyncio.Lock()):
            board = self.running.get(target.key)
            if board and board.alive:
                return board, board.port
            board = await self._start(target)
            self.running[target.key] = board
            return board, board.port

    async def _start(self, target: LocalTarget) -> Board:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        process = await asyncio.create_subprocess_exec(
            self.program,
            "--logdir",
            str(target.logdir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--path_prefix",
            f"/live/{target.key}/tensorboard",
            "--reload_interval",
            "0",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        board = Board(target=target, port=port, process=process)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if not board.alive:
                raise TunnelError("TensorBoard could not start on the job's event files.")
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                log.info("TensorBoard for finished job %s on port %s", target.key, port)
                return board
            await asyncio.sleep(0.2)
        await board.close()
        raise TunnelError("TensorBoard did not start in time; try again in a moment.")

    async def close(self, key: str) -> None:
        board = self.running.pop(key, None)
        if board is not None:
            await board.close()

    async def close_all(self) -> None:
        for key in list(self.running):
            await self.close(key)

    async def reap(self) -> list[str]:
        now = time.monotonic()
        idle = [
            key
            for key, board in self.running.items()
            if not board.alive or now - board.last_used > self.idle_s
        ]
        for key in idle:
            await self.close(key)
        return idle
