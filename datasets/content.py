"""A dataset's files: checked, packed into one canonical archive, hashed and previewed.

The canonical archive is an uncompressed tar of the files in sorted order, with fixed
owners, modes and times. Packing the same files always gives the same bytes, so its SHA-256
identifies the content: an unchanged upload is recognised, and a workstation can check what
it received against the hash the portal recorded.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import stat
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from plumbing.files import open_beneath

PREVIEW_FILES = 200
PREVIEW_ROWS = 5
PREVIEW_TABLES = 3
PREVIEW_IMAGES = 4
PREVIEW_READ_BYTES = 64 * 1024
THUMBNAIL_PIXELS = 160
MOST_PREVIEW_PIXELS = 40_000_000
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp")
# Each part of a path inside a dataset: printable, no separators, not a dot name.
NAME_PART = re.compile(r"[^\x00-\x1f\x7f/\\]{1,255}")


class DatasetContentError(ValueError):
    """Files Nightshift will not take as a dataset; the message says why, in the user's terms."""


@dataclass(frozen=True)
class Limits:
    max_files: int
    max_bytes: int


@dataclass(frozen=True)
class Digest:
    sha256: str
    size_bytes: int
    file_count: int


@dataclass(frozen=True)
class DatasetFile:
    path: str  # relative, '/'-separated
    size: int


def dataset_files(root: Path, limits: Limits) -> list[DatasetFile]:
    """Every regular file under `root`, sorted, or DatasetContentError: links, devices,
    sockets and odd names are refused, and so are more files or bytes than the limits."""
    files: list[DatasetFile] = []
    total = 0
    for directory, subdirectories, names in os.walk(root, followlinks=False):
        subdirectories.sort()
        relative_dir = Path(directory).relative_to(root)
        folders = set(subdirectories)
        for name in [*subdirectories, *names]:
            relative = (relative_dir / name).as_posix()
            if not NAME_PART.fullmatch(name) or name in (".", ".."):
                raise DatasetContentError(f"{relative!r}: this name cannot be used in a dataset.")
            status = os.lstat(Path(directory) / name)
            if stat.S_ISLNK(status.st_mode):
                raise DatasetContentError(f"{relative}: links are not allowed in a dataset.")
            if name in folders:
                continue
            if not stat.S_ISREG(status.st_mode):
                raise DatasetContentError(f"{relative}: only files and folders are allowed.")
            size = status.st_size
            files.append(DatasetFile(relative, size))
            total += size
            if len(files) > limits.max_files:
                raise DatasetContentError(
                    f"The dataset holds more than {limits.max_files:,} files, the limit."
                )
            if total > limits.max_bytes:
                raise DatasetContentError(
                    f"The dataset holds more than {limits.max_bytes / 2**30:.1f} GB, the limit."
                )
    if not files:
        raise DatasetContentError("The dataset holds no files.")
    files.sort(key=lambda file: file.path)
    return files


def _tar_info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o444, 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


class _HashingWriter(io.RawIOBase):
    """Hashes what tarfile writes, and passes it on to `out` (None: nowhere)."""

    def __init__(self, out: IO[bytes] | None) -> None:
        self.digest, self.out, self.written = hashlib.sha256(), out, 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.digest.update(data)
        if self.out is not None:
            self.out.write(data)
        self.written += len(data)
        return len(data)


def pack(
    root: Path,
    files: list[DatasetFile],
    out: IO[bytes] | None,
    progress: Callable[[int], None] | None = None,
    sources: Mapping[str, str] | None = None,
) -> Digest:
    """Writes the canonical archive of `files` to `out` (None: only hashes it). A file that
    changes size while it is read is an error: the version would not be what was checked.
    `sources` reads a file from elsewhere under `root` than its path (a model's file, from
    where its job wrote it). No link below `root` is ever followed (plumbing.files): a
    job that swaps a file for a link while it is packed gets an error, never the link's
    target in its archive."""
    writer = _HashingWriter(out)
    counted = _Counter(progress)
    with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        for file in files:
            relative = sources[file.path] if sources is not None else file.path
            opened = open_beneath(root, relative)
            if opened is None:
                raise DatasetContentError(f"{file.path}: is no longer a plain file.")
            with opened as data:
                if os.fstat(data.fileno()).st_size != file.size:
                    raise DatasetContentError(f"{file.path}: changed while it was being read.")
                archive.addfile(_tar_info(file.path, file.size), _Exactly(data, file.path, counted))
    return Digest(writer.digest.hexdigest(), sum(f.size for f in files), len(files))


class _Counter:
    """Bytes read so far, told to `progress` as they go (large files included)."""

    def __init__(self, progress: Callable[[int], None] | None) -> None:
        self.done, self.progress = 0, progress

    def add(self, count: int) -> None:
        self.done += count
        if self.progress is not None:
            self.progress(self.done)


class _Exactly(io.RawIOBase):
    """A file that must give exactly the bytes it was measured to have."""

    def __init__(self, data: IO[bytes], name: str, counter: _Counter) -> None:
        self.data, self.name, self.counter = data, name, counter

    def read(self, size: int = -1) -> bytes:
        chunk = self.data.read(size)
        if size and size > 0 and len(chunk) < size:
            raise DatasetContentError(f"{self.name}: shrank while it was being read.")
        self.counter.add(len(chunk))
        return chunk


# -- Preview ---------------------------------------------------------------------------------


def _table_rows(path: Path) -> list[list[str]] | None:
    with open(path, "rb") as handle:
        head = handle.read(PREVIEW_READ_BYTES)
    text = head.decode("utf-8", errors="replace")
    lines = text.splitlines()[: PREVIEW_ROWS + 1]
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        rows = []
        for line in lines[:PREVIEW_ROWS]:
            try:
                rows.append([json.dumps(json.loads(line), ensure_ascii=False)[:500]])
            except ValueError:
                rows.append([line[:500]])
        return rows
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    return [[cell[:200] for cell in row][:30] for row in csv.reader(lines, delimiter=delimiter)]


def _thumbnail(path: Path, out: Path) -> bool:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            # Only the header is read so far: a huge image (or a decompression bomb) is
            # passed over before its pixels could fill the portal's memory.
            if image.width * image.height > MOST_PREVIEW_PIXELS:
                return False
            image.thumbnail((THUMBNAIL_PIXELS, THUMBNAIL_PIXELS))
            image.convert("RGB").save(out, format="PNG")
        return True
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        return False


def preview(root: Path, files: list[DatasetFile], thumbnails_dir: Path) -> dict:
    """What a dataset's page shows of it: the file list (capped), the first rows of a few
    tables, and thumbnails of a few images, written into `thumbnails_dir`."""
    tables, images = [], []
    for file in files:
        suffix = Path(file.path).suffix.lower()
        if suffix in (".csv", ".tsv", ".jsonl", ".ndjson") and len(tables) < PREVIEW_TABLES:
            rows = _table_rows(root / file.path)
            if rows:
                tables.append({"path": file.path, "rows": rows})
        elif suffix in IMAGE_SUFFIXES and len(images) < PREVIEW_IMAGES:
            thumbnails_dir.mkdir(parents=True, exist_ok=True)
            name = f"{len(images)}.png"
            if _thumbnail(root / file.path, thumbnails_dir / name):
                images.append({"path": file.path, "thumbnail": name})
    return {
        "files": [{"path": f.path, "size": f.size} for f in files[:PREVIEW_FILES]],
        "more_files": max(0, len(files) - PREVIEW_FILES),
        "tables": tables,
        "images": images,
    }
