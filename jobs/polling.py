"""What an open job page's poll costs when nothing has changed: its ETag, made from what the
status document is built from, without building it.

The page asks every two seconds; with a whole class watching, most polls find nothing new.
The ETag covers each thing the document shows: the job's row, its events, its logs (size and
change time, and the offsets the page asked from), its output files, its schedd's problem and
what the viewer may do. A poll whose ETag matches is answered 304 with no body, no log read,
no template rendered.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from django.db.models import Max

from .models import Job
from .selectors import kept_paths


def job_status_etag(
    job: Job, *, offsets: Mapping[str, int], logs: Mapping[str, Path], context: tuple
) -> str:
    """A strong ETag for the status document of `job` as this viewer would get it now.
    `context` holds whatever else the document depends on (permissions, a schedd's
    problem), each part's repr stable."""
    digest = hashlib.blake2b(digest_size=16)
    for field in Job._meta.concrete_fields:
        digest.update(repr(getattr(job, field.attname)).encode())
    # Events are only ever added: the newest one's id says whether there is another.
    last_event = job.events.aggregate(last=Max("pk"))["last"]
    digest.update(repr((last_event, sorted(offsets.items()))).encode())
    for stream, path in sorted(logs.items()):
        digest.update(f"{stream}:{_stamp(path)}".encode())
    for name in kept_paths(job):
        _add_tree(digest, job.directory / name)
    digest.update(repr(context).encode())
    return digest.hexdigest()


def _stamp(path: Path) -> str:
    try:
        found = os.lstat(path)
    except OSError:
        return "-"
    return f"{found.st_size}:{found.st_mtime_ns}:{found.st_mode}"


def _add_tree(digest, top: Path) -> None:
    """Every entry under an output path, as job_output_files walks it (links not followed)."""
    digest.update(f"{top.name}:{_stamp(top)}".encode())
    if top.is_symlink() or not top.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames) + dirnames:
            path = os.path.join(dirpath, name)
            digest.update(f"{path}:{_stamp(Path(path))}".encode())
