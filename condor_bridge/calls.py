"""How the bridge's calls to a schedd fail and are made again, and how a cluster's items
reach it: the parts of talking to HTCondor that are not one of the bridge's calls."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import htcondor2
from htcondor2 import HTCondorException

from .types import BridgeError

# A restarted schedd no longer knows the security session the portal cached: HTCondor drops
# that session, and the next call negotiates a new one.
_STALE_SESSION = "rejected our session id"
_TRANSIENT_MARKERS = (
    "failed to connect",
    "unable to locate",
    "connect to",
    "timed out",
    "timeout",
    "failed to send",
    "failed to get",
    "communicate",
    "errno",
    "unable to find",
    "closed",
    "refused",
    _STALE_SESSION,
    "failed to fetch ads",
    # A schedd that is stopping or starting refuses new clusters for a moment.
    "failed to create new cluster",
)


def bridge_error(action: str, exc: Exception) -> BridgeError:
    text = str(exc)
    transient = isinstance(exc, OSError | TimeoutError) or any(
        marker in text.lower() for marker in _TRANSIENT_MARKERS
    )
    return BridgeError(f"{action}: {text or type(exc).__name__}", transient=transient)


def _once_more_if_failed_with(call: Callable[[], Any], markers: tuple[str, ...]) -> Any:
    """`call`, and once more if htcondor2 failed it with an error naming one of `markers`."""
    try:
        return call()
    except HTCondorException as exc:
        text = str(exc).lower()
        if not any(marker in text for marker in markers):
            raise
        return call()


def again_if_session_stale(call: Callable[[], Any]) -> Any:
    """`call`, and once more if the schedd rejected the security session: a restarted schedd
    forgets the sessions it granted, HTCondor then drops ours, and the second call
    negotiates a new one. A rejected session means the command was never carried out."""
    return _once_more_if_failed_with(call, (_STALE_SESSION,))


# What htcondor2's Schedd.act says of any failure, a rejected session's included: the
# first action on a job after its schedd restarted failed with it, the second went through.
_ACTION_FAILED = "error when performing action on the schedd"


def again_if_action_failed(call: Callable[[], Any]) -> Any:
    """`call` (a Schedd.act), and once more if it failed as a stale session makes it fail
    (again_if_session_stale; act's error does not say why). Safe as for a read: an action
    done twice does no more than once (a removed job is not removed again, a held one not
    held again), and of its tally only the jobs it did not find are read."""
    return _once_more_if_failed_with(call, (_ACTION_FAILED, _STALE_SESSION))


# Between an item's values in an itemdata file: HTCondor splits a line on it alone when it
# is there, so values may hold spaces and commas (htcondor2 sends its inline itemdata so).
ITEM_SEPARATOR = "\x1f"


def submit_items_from_file(
    schedd: htcondor2.Schedd,
    submit: htcondor2.Submit,
    items: list[dict[str, str]],
    *,
    spool: bool,
) -> Any:
    """Submit one job per item, the items read by HTCondor from a file (`queue ... from
    FILE`). htcondor2's own itemdata builds its submit text by adding each item's line to
    the whole text so far: at ten thousand runs of a sweep that copying cost seconds."""
    names = list(items[0])
    descriptor, path = tempfile.mkstemp(prefix="nightshift-items-", suffix=".txt")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            for item in items:
                values = [item[name] for name in names]
                if any("\n" in value or ITEM_SEPARATOR in value for value in values):
                    raise ValueError("itemdata values must not contain newlines or unit separators")
                stream.write(ITEM_SEPARATOR.join(values))
                stream.write("\n")
        if any(character.isspace() or character == "," for character in path):
            return schedd.submit(submit, itemdata=iter(items), spool=spool)  # as htcondor2 would
        return schedd.submit(submit, queue=f"{','.join(names)} from {path}", spool=spool)
    finally:
        os.unlink(path)
