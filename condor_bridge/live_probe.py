"""Which of a running job's live services listen, and on which ports: run on the workstation.

The portal runs this inside the job (through condor_ssh_to_job, as the job's own user, in
its sandbox), passed inline, so that nothing the job could have changed is trusted. It
prints one JSON line, {"services": {"tensorboard": 41234, "serve": 8123}, "problems": []}.

A service counts only when a process of *this* job (its environment carries this job's
_CONDOR_SCRATCH_DIR) listens on 127.0.0.1 on the port that the launcher gave it
(NIGHTSHIFT_LIVE_SERVICE and NIGHTSHIFT_LIVE_PORT in that process's environment). A job that
names a port another process listens on, another job's TensorBoard on the same desktop for
instance, is refused: the portal never forwards to it. Standard library only.
"""

import json
import os
import sys

LISTEN = "0A"
LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
SERVICE_VARIABLE = "NIGHTSHIFT_LIVE_SERVICE"
PORT_VARIABLE = "NIGHTSHIFT_LIVE_PORT"
SCRATCH_VARIABLE = "_CONDOR_SCRATCH_DIR"


def listening_sockets():
    """{inode: port} of the TCP sockets that listen on the loopback address (or on every
    address, which includes it)."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as stream:
                rows = stream.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 10 or fields[3] != LISTEN:
                continue
            address, _, port = fields[1].partition(":")
            if address.upper() in LOOPBACK:
                found[fields[9]] = int(port, 16)
    return found


def environment_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as stream:
            pairs = stream.read().split(b"\0")
    except OSError:
        return {}
    environment = {}
    for pair in pairs:
        key, _, value = pair.partition(b"=")
        environment[key.decode(errors="replace")] = value.decode(errors="replace")
    return environment


def sockets_of(pid):
    inodes = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def probe(scratch):
    listening = listening_sockets()
    services, problems = {}, []
    for pid in (name for name in os.listdir("/proc") if name.isdigit()):
        ports = [listening[i] for i in sockets_of(pid) if i in listening]
        if not ports:
            continue
        environment = environment_of(pid)
        service = environment.get(SERVICE_VARIABLE, "")
        if not service:
            continue
        if environment.get(SCRATCH_VARIABLE) != scratch:
            continue  # another job's process, or no job's: never this job's service
        wanted = environment.get(PORT_VARIABLE, "")
        for port in ports:
            if str(port) == wanted:
                services[service] = port
            else:
                problems.append(f"{service} listens on port {port}, not its port {wanted}")
    return {"services": services, "problems": problems}


def main():
    scratch = os.environ.get(SCRATCH_VARIABLE) or os.getcwd()
    print(json.dumps(probe(scratch)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
