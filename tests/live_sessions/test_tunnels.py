"""Closing tunnels: one whose job stopped running, one unused for too long, one whose ssh
ended; closing signals every process the command started."""

import asyncio
import os

from live_sessions.tunnels import Target, Tunnel, TunnelManager
from tests.live_sessions.harness import run_async


async def open_tunnel(manager: TunnelManager, key: str, folder) -> Tunnel:
    # A stand-in for condor_ssh_to_job: a wrapper (like the personal pool's) and its child.
    process = await asyncio.create_subprocess_exec(
        "sh", "-c", "sleep 60 & wait", start_new_session=True
    )
    tunnel = Tunnel(
        target=Target(key, 7, 0),
        endpoints={"serve": 4000},
        sockets={"serve": str(folder / f"{key}.sock")},
        process=process,
    )
    manager.tunnels[key] = tunnel
    return tunnel


def group_alive(process) -> bool:
    """Whether a process of the group still runs (a zombie waiting for its parent does not)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stream:
                fields = stream.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == process.pid and fields[0] != "Z":
            return True
    return False


def test_tunnels_close_when_their_job_stops_or_nobody_uses_them(tmp_path):
    async def scenario():
        manager = TunnelManager(ssh_to_job=["condor_ssh_to_job"], folder=tmp_path, idle_s=60)
        stopped = await open_tunnel(manager, "stopped", tmp_path)
        idle = await open_tunnel(manager, "idle", tmp_path)
        used = await open_tunnel(manager, "used", tmp_path)
        idle.last_used -= 61
        closed = await manager.reap(running={"idle", "used"})
        assert sorted(closed) == ["idle", "stopped"]
        assert list(manager.tunnels) == ["used"]
        for _ in range(50):
            if not group_alive(stopped.process) and not group_alive(idle.process):
                break
            await asyncio.sleep(0.1)
        assert not group_alive(stopped.process) and not group_alive(idle.process)
        assert group_alive(used.process)
        used.process.kill()
        await used.process.wait()
        assert await manager.reap(running={"used"}) == ["used"]  # its ssh ended

    run_async(scenario())
