"""Where the portal keeps datasets: one archive per distinct content, thumbnails per
version's content, and a private folder per import while it is being checked."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

_SHA256 = re.compile(r"[0-9a-f]{64}")


def _checked(sha256: str) -> str:
    if not _SHA256.fullmatch(sha256):
        raise ValueError(f"not a SHA-256: {sha256!r}")
    return sha256


def archive_path(sha256: str) -> Path:
    return settings.DATASETS_DIR / "objects" / f"{_checked(sha256)}.tar"


def thumbnails_dir(sha256: str) -> Path:
    return settings.DATASETS_DIR / "previews" / _checked(sha256)


def incoming_dir(import_id: str) -> Path:
    return settings.DATASETS_DIR / "incoming" / str(import_id)


def shared_folder_exists(path: str) -> bool:
    return Path(path).is_dir()


def uploads_dir() -> Path:
    """Where resumable uploads keep their bytes until the last one arrives."""
    return settings.DATASETS_DIR / "uploads"
