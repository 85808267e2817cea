"""Which of a running job's live services listen, and where: run on the workstation.

The portal runs this inside the job (through condor_ssh_to_job, as the job's own user, in
its sandbox), passed inline, so that nothing the job could have changed is trusted. It
prints one JSON line, {"services": {"tensorboard": "/.../tensorboard.sock", "serve": 8123},
"problems": []}.

A service counts only when a process of *this* job (its environment carries this job's
_CONDOR_SCRATCH_DIR) listens where the launcher told it to (NIGHTSHIFT_LIVE_SERVICE, with
NIGHTSHIFT_LIVE_SOCKET or NIGHTSHIFT_LIVE_PORT, in that process's environment): on a Unix
socket in a folder that only this job's account may enter, or else on that port of
127.0.0.1. A job that names a socket or port another process listens on, another job's
TensorBoard on the same desktop for instance, is refused: the portal never forwards to it.
Standard library only.
"""

import json
import os
import sys

LISTEN = "0A"
LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
SERVICE_VARIABLE = "NIGHTSHIFT_LIVE_SERVICE"
PORT_VARIABLE = "NIGHTSHIFT_LIVE_PORT"
SOCKET_VARIABLE = "NIGHTSHIFT_LIVE_SOCKET"
ACCEPTS_CONNECTIONS = 0x10000  # __SO_ACCEPTCON in /proc/net/unix's Flags
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


def listening_unix_sockets():
    """{inode: path} of the Unix stream sockets that listen on a path."""
    found = {}
    try:
        with open("/proc/net/unix") as stream:
            rows = stream.read().splitlines()[1:]
    except OSError:
        return found
    for row in rows:
        fields = row.split()
        if len(fields) < 8 or fields[4] != "0001":
            continue
        if int(fields[3], 16) & ACCEPTS_CONNECTIONS:
            found[fields[6]] = fields[7]
    return found


def private_to_this_account(path):
    """The socket's folder belongs to this account, and nobody else may enter it."""
    try:
        folder = os.stat(os.path.dirname(path))
    except OSError:
        return False
    return folder.st_uid == os.getuid() and not folder.st_mode & 0o077


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
    unix = listening_unix_sockets()
    services, problems = {}, []
    for pid in (name for name in os.listdir("/proc") if name.isdigit()):
        inodes = sockets_of(pid)
        ports = [listening[i] for i in inodes if i in listening]
        paths = [unix[i] for i in inodes if i in unix]
        if not ports and not paths:
            continue
        environment = environment_of(pid)
        service = environment.get(SERVICE_VARIABLE, "")
        if not service:
            continue
        if environment.get(SCRATCH_VARIABLE) != scratch:
            continue  # another job's process, or no job's: never this job's service
        wanted_socket = environment.get(SOCKET_VARIABLE, "")
        if wanted_socket and wanted_socket in paths:
            if private_to_this_account(wanted_socket):
                services[service] = wanted_socket
                continue
            problems.append(f"{service}'s socket is in a folder other accounts may enter")
        wanted = environment.get(PORT_VARIABLE, "")
        for port in ports if wanted else ():
            if str(port) == wanted:
                services.setdefault(service, port)
            else:
                problems.append(f"{service} listens on port {port}, not its port {wanted}")
    return {"services": services, "problems": problems}


def main():
    scratch = os.environ.get(SCRATCH_VARIABLE) or os.getcwd()
    print(json.dumps(probe(scratch)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
