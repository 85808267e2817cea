#!/usr/bin/env python3
"""The workstation's cache keeper: what jobs share, built by an account no job runs as.

A workstation's environment and dataset caches are reused by every later job, whoever
submits it. If jobs wrote them, a hostile job could leave a `sitecustomize.py` in an
environment, or change a dataset's files, and another student's next job would run or read
it. So the execute-node kit runs a keeper (cache_keeper_daemon.py, under condor_master, as
the account NIGHTSHIFT_CACHE_KEEPER_USER, which owns the caches) and jobs only read the
caches. This module is the jobs' side of it.

A job's launcher (and its dataset plugin) asks over the keeper's Unix socket, which the
machine attribute NightshiftCacheKeeper names: one JSON request per connection, answered by
lines of progress ({"log": ...}) and then {"ok": {...}} or {"error": "..."}.

- `environment`: the job's lock. The keeper installs it with uv from wheels only (no
  package's own code runs while installing) into CACHE/envs/KEY, for a Python the job
  names that root owns and nobody else can change, and answers with its path.
- `dataset`: a dataset version, its portal URL and the job's credential. The keeper fetches
  it as the launcher would, checks its SHA-256 while it streams, and answers with its path.

The job keeps the connection open for as long as it runs, and the keeper holds the entry's
lock shared for it until then, so that it never removes what a job uses. Jobs cannot write
the caches, nor open their locks, nor list which environments and datasets they hold (the
folders are 0711: an entry is reached only by its digest).

Standard library only: it runs with whatever Python the workstation has.
"""

import json
import os
import re
import socket

# What one request may be: a lock of a few thousand packages fits many times over.
MAX_REQUEST_BYTES = 4 * 1024 * 1024
SHA256 = re.compile(r"[0-9a-f]{64}")


class KeeperRefused(Exception):
    """The keeper could not give the job what it asked for; the message says why."""


def ask(path, request, log, held):
    """The keeper's answer to `request` (a dict); its progress goes to `log`. The keeper
    holds what it answered with (so that it never removes it to make room) for as long as
    the connection stays open: it is kept in `held`, and the job inherits it across exec
    and closes it by exiting."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
        connection.sendall(json.dumps(request).encode() + b"\n")
        with connection.makefile("rb") as answers:
            for line in answers:
                answer = json.loads(line)
                if "log" in answer:
                    log(str(answer["log"]))
                elif "error" in answer:
                    raise KeeperRefused(f"the cache keeper refused: {answer['error']}")
                else:
                    os.set_inheritable(connection.fileno(), True)
                    held.append(connection)
                    return answer["ok"]
    except (OSError, ValueError, KeyError) as exc:
        connection.close()
        raise KeeperRefused(f"the cache keeper at {path} could not be asked ({exc})") from None
    except KeeperRefused:
        connection.close()
        raise
    connection.close()
    raise KeeperRefused("the cache keeper closed the connection without an answer")


class KeeperCache(str):
    """A cache only the keeper writes, as a job sees it: the path of the keeper's socket."""


def dataset(keeper, wanted, credential, log, held, workstation=""):
    """A dataset's folder in the cache from the keeper, and the bytes it fetched; None (the
    reason logged) where it could not, and the job fetches into its own sandbox."""
    request = {"op": "dataset", "dataset": wanted, "credential": credential}
    request["job"] = os.environ.get("NIGHTSHIFT_JOB_ID", "")
    request["slot"] = workstation
    try:
        answer = ask(keeper, request, log, held)
    except KeeperRefused as exc:
        log(f"{wanted['reference']}: {exc}: fetching into the job's sandbox, for this job only")
        return None
    return answer["target"], answer["received"]


def trusted_python(path):
    """`path` resolved, if root owns it and every folder above it, and nobody else may
    write any of them; else None. The keeper runs only such a Python."""
    if not isinstance(path, str) or not os.path.isabs(path):
        return None
    real = os.path.realpath(path)
    part = real
    while True:
        try:
            status = os.stat(part)
        except OSError:
            return None
        if status.st_uid != 0 or status.st_mode & 0o022:
            return None
        if part == "/":
            return real if os.access(real, os.X_OK) else None
        part = os.path.dirname(part)
