"""Reaching a running job's own web services through HTCondor's tunnel, condor_ssh_to_job.

The starter runs sshd over the connection HTCondor has already authenticated (through CCB
where the workstation is behind NAT), so nothing listens on the workstation's network. Two
calls, each an argument list that no local shell parses:

- `probe_command`: runs live_probe.py inside the job, which names the Unix sockets (or, for
  a served job that binds one, the port of 127.0.0.1) that this job's own processes listen
  on (nothing the job wrote is trusted);
- `forward_command`: `ssh -N` forwarding a Unix socket on the portal's side (in a folder
  only the portal can enter) to that socket, or 127.0.0.1:PORT, inside the job, for each
  probed service.

Pure functions only: the live_sessions app runs them.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from .types import LIVE_SERVICES, SCHEDD_NAME_PATTERN

_SOCKET_PATH = re.compile(r"/[A-Za-z0-9_./-]{1,100}")
# Where a service listens inside the job: its Unix socket's path, or a port of 127.0.0.1.
Endpoint = int | str
_PROBE_SOURCE = (Path(__file__).with_name("live_probe.py")).read_bytes()


class ProbeError(ValueError):
    """The probe's answer could not be read."""


def _job(cluster_id: int, proc_id: int) -> str:
    if not (isinstance(cluster_id, int) and isinstance(proc_id, int)):
        raise ValueError("a job id is two whole numbers")
    if cluster_id < 1 or proc_id < 0:
        raise ValueError("not a job id")
    return f"{cluster_id}.{proc_id}"


def _schedd(schedd: str) -> list[str]:
    """condor_ssh_to_job's options for the job's schedd ("": the default one)."""
    if not schedd:
        return []
    if not SCHEDD_NAME_PATTERN.fullmatch(schedd):
        raise ValueError(f"{schedd!r} is not a schedd's name")
    return ["-name", schedd]


def _python(python: str) -> str:
    if not re.fullmatch(r"/[A-Za-z0-9_./+-]{1,200}", python) or ".." in python.split("/"):
        raise ValueError(f"{python!r} is not a plain absolute path")
    return python


def probe_command(
    ssh_to_job: list[str],
    cluster_id: int,
    proc_id: int,
    *,
    python: str = "/usr/bin/python3",
    schedd: str = "",
) -> list[str]:
    """Runs the probe inside the job; its stdout is one JSON line (`parse_probe`)."""
    encoded = base64.b64encode(_PROBE_SOURCE).decode()
    # The remote side hands this line to the job's shell: only [A-Za-z0-9+/=] are varied.
    remote = f"{_python(python)} -c 'import base64;exec(base64.b64decode(\"{encoded}\"))'"
    # A job the schedd has just started may not take a connection yet: HTCondor retries.
    return [*ssh_to_job, "-auto-retry", *_schedd(schedd), _job(cluster_id, proc_id), remote]


def forward_command(
    ssh_to_job: list[str],
    cluster_id: int,
    proc_id: int,
    forwards: dict[str, Endpoint],
    *,
    schedd: str = "",
) -> list[str]:
    """Keeps one Unix socket per service forwarded until killed; each socket path is local
    (on the portal's side) and each endpoint is inside the job."""
    if not forwards:
        raise ValueError("nothing to forward")
    options = ["ssh", "-N", "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes"]
    for socket_path, endpoint in forwards.items():
        options += ["-L", f"{_socket_path(socket_path)}:{_remote(endpoint)}"]
    # condor_ssh_to_job splits -ssh at spaces; nothing above has one.
    return [*ssh_to_job, *_schedd(schedd), "-ssh", " ".join(options), _job(cluster_id, proc_id)]


def _socket_path(path: str) -> str:
    if not isinstance(path, str) or not _SOCKET_PATH.fullmatch(path) or ".." in path.split("/"):
        raise ValueError(f"{path!r} is not a plain absolute path")
    return path


def _remote(endpoint: Endpoint) -> str:
    if isinstance(endpoint, str):
        return _socket_path(endpoint)
    if isinstance(endpoint, bool) or not isinstance(endpoint, int):
        raise ValueError(f"{endpoint!r} is neither a socket nor a port")
    if not 1024 <= endpoint <= 65535:
        raise ValueError(f"{endpoint!r} is not a port a job may use")
    return f"127.0.0.1:{endpoint}"


def parse_probe(output: str) -> dict[str, Endpoint]:
    """{service: socket path or port} from the probe's output, only for services a job may
    run and endpoints that can be forwarded."""
    for line in reversed(output.strip().splitlines()):
        try:
            answer = json.loads(line)
        except ValueError:
            continue
        services = answer.get("services") if isinstance(answer, dict) else None
        if not isinstance(services, dict):
            break
        found = {}
        for name, endpoint in services.items():
            if name not in LIVE_SERVICES:
                continue
            try:
                _remote(endpoint)
            except ValueError:
                continue
            found[name] = endpoint
        return found
    raise ProbeError(f"the job's probe gave no answer: {output.strip()[-300:]!r}")
