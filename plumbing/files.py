"""Reading files that an untrusted program wrote, without ever following a link it made.

A job runs as an account that may replace any file in its folder, at any moment, by a link
to the portal's secrets. Checking a path and then opening it loses that race; resolving
it and checking the result does too. Here every component below the root is opened with
O_NOFOLLOW, relative to the folder opened just before (openat), so what is read is what
lies inside the root at the moment of reading, or nothing.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import BinaryIO

_DIRECTORY = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def relative_parts(relative: str | PurePosixPath) -> tuple[str, ...] | None:
    """The components of a path inside a root, or None for one that could leave it or
    names nothing (absolute, empty, `.`, `..`, NUL)."""
    text = str(relative)
    if not text or "\x00" in text or text.startswith("/"):
        return None
    parts = tuple(text.split("/"))
    if any(part in ("", ".", "..") for part in parts):
        return None
    return parts


def open_beneath(root: Path, relative: str | PurePosixPath) -> BinaryIO | None:
    """The regular file at `relative` under `root`, opened for reading, or None when any
    component is a link, a component is missing, or the end is not a regular file. The
    root itself is the caller's (it may be reached through links the portal made)."""
    parts = relative_parts(relative)
    if parts is None:
        return None
    try:
        folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIRECTORY, dir_fd=folder)
            os.close(folder)
            folder = inner
        # O_NONBLOCK: a FIFO the job left opens at once, and is refused below.
        descriptor = os.open(parts[-1], _FILE, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        return None
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")


def relative_to_root(root: Path, path: Path) -> PurePosixPath | None:
    """`path` as a path under `root`, read from the names alone (nothing is resolved, so a
    link in `path` cannot move it), or None for one outside."""
    for base in (root, root.resolve()):
        try:
            return PurePosixPath(path.relative_to(base).as_posix())
        except ValueError:
            continue
    return None
