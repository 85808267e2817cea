"""Project archives (.zip, .tar.gz) checked before use, and unpacked one member at a time.

Nothing in an archive is trusted: names are checked for absolute paths, `..` and
control characters; links, devices and other special members are refused; the file
count, the expanded size and each member's compression ratio are bounded, and the
bytes actually written are counted again while unpacking.
"""

from __future__ import annotations

import os
import re
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")
# Names the job sandbox uses itself; an archive may not bring its own.
RESERVED_TOP_LEVEL = {".nightshift", ".source", "stdout.txt", "stderr.txt", "condor.log"}
_TOP_LEVEL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=@-]{0,99}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\\]")
MAX_RATIO = 200  # expanded / compressed, per member


class ArchiveError(ValueError):
    """An archive Nightshift will not use; the message says why, in the user's terms."""


@dataclass(frozen=True)
class ArchiveLimits:
    max_files: int
    max_expanded_bytes: int


@dataclass(frozen=True)
class Member:
    name: str  # normalized, relative, '/'-separated
    size: int
    is_dir: bool


def is_archive(filename: str) -> bool:
    return filename.lower().endswith(ARCHIVE_SUFFIXES)


def _clean_name(raw: str) -> str:
    if _CONTROL.search(raw):
        raise ArchiveError(f"{raw!r}: names may not contain control characters or backslashes.")
    if raw.startswith("/"):
        raise ArchiveError(f"{raw}: absolute paths are not allowed in a project archive.")
    parts = [part for part in PurePosixPath(raw).parts if part not in ("", ".")]
    if any(part == ".." for part in parts):
        raise ArchiveError(f"{raw}: '..' would reach outside the project.")
    if not parts:
        raise ArchiveError(f"{raw!r} is not a usable name.")
    if parts[0] in RESERVED_TOP_LEVEL:
        raise ArchiveError(f"{parts[0]}: this name is used by Nightshift itself; rename it.")
    if not _TOP_LEVEL.fullmatch(parts[0]):
        raise ArchiveError(
            f"{parts[0]}: top-level names may use letters, digits and _ . + = @ - only."
        )
    return "/".join(parts)


@contextmanager
def _open(path: Path) -> Iterator[tuple[list[Member], Callable[[Member], IO[bytes]]]]:
    """(members, opener) for a .zip, .tar.gz or .tar, with every member already checked."""
    name = path.name.lower()
    if name.endswith(".zip"):
        try:
            archive = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise ArchiveError(f"This is not a readable .zip file ({exc}).") from None
        with archive:
            members, infos = [], {}
            for info in archive.infolist():
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode):
                    raise ArchiveError(f"{info.filename}: symbolic links are not allowed.")
                # Many zip writers set permission bits only, without a file type.
                if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    raise ArchiveError(f"{info.filename}: only files and folders are allowed.")
                clean = _clean_name(info.filename)
                if not info.is_dir() and info.file_size > MAX_RATIO * max(info.compress_size, 1024):
                    raise ArchiveError(
                        f"{info.filename}: compressed suspiciously well (zip bomb?)."
                    )
                members.append(Member(clean, info.file_size, info.is_dir()))
                infos[clean] = info
            yield members, lambda member: archive.open(infos[member.name])
        return
    kind = ".tar" if name.endswith(".tar") else ".tar.gz"
    try:
        archive = tarfile.open(path, mode="r:" if kind == ".tar" else "r:gz")  # noqa: SIM115 - closed by the with below
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ArchiveError(f"This is not a readable {kind} file ({exc}).") from None
    with archive:
        members, infos = [], {}
        try:
            entries = archive.getmembers()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ArchiveError(f"This {kind} file is damaged ({exc}).") from None
        for info in entries:
            if info.issym() or info.islnk():
                raise ArchiveError(f"{info.name}: symbolic and hard links are not allowed.")
            if not (info.isfile() or info.isdir()):
                raise ArchiveError(f"{info.name}: only files and folders are allowed.")
            clean = _clean_name(info.name)
            members.append(Member(clean, info.size, info.isdir()))
            infos[clean] = info
        yield members, lambda member: archive.extractfile(infos[member.name])


def check_archive(path: Path, limits: ArchiveLimits) -> list[Member]:
    """The archive's members, or ArchiveError saying what is wrong with it."""
    with _open(path) as (members, _opener):
        _check_totals(members, limits)
        return members


def _check_totals(members: list[Member], limits: ArchiveLimits) -> None:
    files = [m for m in members if not m.is_dir]
    if not files:
        raise ArchiveError("The archive holds no files.")
    if len(files) > limits.max_files:
        raise ArchiveError(
            f"The archive holds {len(files)} files; the limit is {limits.max_files}."
        )
    names = [m.name for m in files]
    if len(set(names)) != len(names):
        raise ArchiveError("The archive holds the same file name twice.")
    total = sum(m.size for m in files)
    if total > limits.max_expanded_bytes:
        raise ArchiveError(
            f"The archive expands to {total / 2**20:.0f} MB; the limit is "
            f"{limits.max_expanded_bytes / 2**20:.0f} MB."
        )


def extract_archive(path: Path, target: Path, limits: ArchiveLimits) -> list[Member]:
    """Unpack into `target` (which must exist), member by member, never through links."""
    target = target.resolve()
    written = 0
    with _open(path) as (members, opener):
        _check_totals(members, limits)
        for member in members:
            destination = target / member.name
            if target not in destination.parents:
                raise ArchiveError(f"{member.name}: would be written outside the project.")
            if member.is_dir:
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            if destination.is_symlink() or destination.exists():
                raise ArchiveError(f"{member.name}: appears twice in the archive.")
            source = opener(member)
            if source is None:
                raise ArchiveError(f"{member.name}: cannot be read.")
            with source, open(destination, "xb") as out:
                while chunk := source.read(1 << 20):
                    written += len(chunk)
                    if written > limits.max_expanded_bytes:
                        raise ArchiveError("The archive expands to more than it says (zip bomb?).")
                    out.write(chunk)
            os.chmod(destination, 0o644)
    return members
