"""Where the portal keeps datasets: one archive per distinct content, thumbnails per
version's content, and a private folder per import while it is being checked."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from django.conf import settings
from django.http import FileResponse

from .content import Digest

_SHA256 = re.compile(r"[0-9a-f]{64}")


def _checked(sha256: str) -> str:
    if not _SHA256.fullmatch(sha256):
        raise ValueError(f"not a SHA-256: {sha256!r}")
    return sha256


def archive_path(sha256: str) -> Path:
    return settings.DATASETS_DIR / "objects" / f"{_checked(sha256)}.tar"


def archive_download(sha256: str, filename: str) -> FileResponse:
    """The stored archive `sha256` as a download named `filename`, with its SHA-256 in
    X-Checksum-Sha256; FileNotFoundError if it is no longer stored."""
    archive = open(archive_path(sha256), "rb")  # noqa: SIM115 - FileResponse closes it
    response = FileResponse(
        archive, as_attachment=True, content_type="application/x-tar", filename=filename
    )
    response["X-Checksum-Sha256"] = sha256
    return response


def archive_store(partial: Path, pack: Callable[[IO[bytes]], Digest]) -> Digest:
    """The archive that `pack` writes (content.pack, say), kept under its SHA-256: written
    to `partial` in the store's folder first and moved into place whole, so that no reader
    ever sees half of one. The same content stored already is kept as it is."""
    partial.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(partial, "xb") as out:
            digest = pack(out)
            out.flush()
            os.fsync(out.fileno())
        final = archive_path(digest.sha256)
        if not final.exists():  # else: the same content (another dataset, or a re-upload)
            os.chmod(partial, 0o644)
            os.replace(partial, final)
    finally:
        partial.unlink(missing_ok=True)
    return digest


def partial_archive_path() -> Path:
    """Where an archive is written before it is known by its hash (see archive_store)."""
    return settings.DATASETS_DIR / "objects" / f".partial-{uuid.uuid4().hex}.tar"


def thumbnails_dir(sha256: str) -> Path:
    return settings.DATASETS_DIR / "previews" / _checked(sha256)


def incoming_dir(import_id: str) -> Path:
    return settings.DATASETS_DIR / "incoming" / str(import_id)


def shared_folder_exists(path: str) -> bool:
    return Path(path).is_dir()


def uploads_dir() -> Path:
    """Where resumable uploads keep their bytes until the last one arrives."""
    return settings.DATASETS_DIR / "uploads"


# Other apps keep archives here too (a published model's files): each says which of some
# hashes it still holds, so that deleting a dataset never removes content they need.
_holders: list[Callable[[set[str]], Iterable[str]]] = []


def archive_holder_register(held: Callable[[set[str]], Iterable[str]]) -> None:
    if held not in _holders:
        _holders.append(held)


def archives_held_elsewhere(hashes: set[str]) -> set[str]:
    """Which of `hashes` an app other than datasets still keeps in the store."""
    return {sha256 for held in _holders for sha256 in held(set(hashes))}
