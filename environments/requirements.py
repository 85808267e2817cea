"""What a requirements specification may say: package requirements only.

Options that make pip or uv reach somewhere other than the site's index (other indexes,
trusted hosts, link pages, editable installs, version-control and local or file URLs) are
refused with the reason, unless the site allows that kind (NIGHTSHIFT_REQUIREMENTS_ALLOW).
A specification that uses an allowed option is not locked: its job installs it in its
sandbox as before, since the lock could not be reproduced on a workstation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement

MAX_REQUIREMENTS_BYTES = 64 * 1024
MAX_REQUIREMENT_LINES = 500

# The kinds of outside reach a site may allow, and the setting's word for each.
INDEX_OPTIONS = "index"
VCS = "vcs"
LOCAL = "local"
ALLOWABLE = (INDEX_OPTIONS, VCS, LOCAL)

_INDEX_FLAGS = {
    "-i": "--index-url",
    "--index-url": "--index-url",
    "--extra-index-url": "--extra-index-url",
    "--trusted-host": "--trusted-host",
    "-f": "--find-links",
    "--find-links": "--find-links",
    "--no-index": "--no-index",
}
_EDITABLE_FLAGS = ("-e", "--editable")
_INCLUDE_FLAGS = ("-r", "--requirement", "-c", "--constraint")
_VCS_PREFIX = re.compile(r"^(git|hg|svn|bzr)\+", re.IGNORECASE)
_HASH_OPTION = re.compile(r"\s+--hash[=\s]+\S+")
_LOOKS_LOCAL = re.compile(r"^(\.{1,2}/|/|~|[A-Za-z]:\\)|\.(whl|tar\.gz|zip|tar\.bz2)$", re.I)


class RequirementsError(ValueError):
    """A specification refused; the message says which line and why, in plain words."""


@dataclass(frozen=True)
class Requirements:
    """A checked specification: its package lines, and what it needs the site to allow."""

    text: str
    packages: tuple[str, ...]
    reaches_outside: tuple[str, ...]  # allowed kinds it uses; then it is not locked

    @property
    def lockable(self) -> bool:
        return not self.reaches_outside


def _logical_lines(text: str):
    """(line number, content) with comments dropped and continuations joined."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        if whole:
            yield start, whole
    if pending.strip():
        yield start, pending.strip()


def _refuse(number: int, what: str, kind: str, allowed: frozenset[str]) -> str:
    if kind in allowed:
        return kind
    raise RequirementsError(
        f"Line {number}: {what} is not accepted here; list packages by name, e.g. numpy>=1.26. "
        f"Your administrator can allow it with NIGHTSHIFT_REQUIREMENTS_ALLOW={kind}."
    )


def requirements_check(text: str, *, allowed: frozenset[str] = frozenset()) -> Requirements:
    """The specification `text`, checked; RequirementsError says what is wrong with it."""
    if len(text.encode()) > MAX_REQUIREMENTS_BYTES:
        raise RequirementsError(
            f"The requirements are larger than {MAX_REQUIREMENTS_BYTES // 1024} KB; "
            "list only the packages you import."
        )
    if "\x00" in text:
        raise RequirementsError("The requirements are not a text file.")
    packages: list[str] = []
    reaches: list[str] = []
    lines = list(_logical_lines(text))
    if len(lines) > MAX_REQUIREMENT_LINES:
        raise RequirementsError(f"At most {MAX_REQUIREMENT_LINES} requirements, please.")
    for number, line in lines:
        if any(ord(c) < 32 and c != "\t" for c in line):
            raise RequirementsError(f"Line {number}: control characters are not allowed.")
        line = _HASH_OPTION.sub("", line)
        word = line.split(None, 1)[0].split("=", 1)[0]
        if word.startswith("-"):
            if word in _INDEX_FLAGS:
                reaches.append(
                    _refuse(
                        number,
                        f"{_INDEX_FLAGS[word]} (another package index or source)",
                        INDEX_OPTIONS,
                        allowed,
                    )
                )
            elif word in _EDITABLE_FLAGS:
                target = line.split(None, 1)[1] if " " in line else ""
                kind = VCS if _VCS_PREFIX.match(target) else LOCAL
                reaches.append(_refuse(number, "-e (an editable install)", kind, allowed))
            elif word in _INCLUDE_FLAGS:
                raise RequirementsError(
                    f"Line {number}: {word} names another file; put its requirements here."
                )
            else:
                raise RequirementsError(
                    f"Line {number}: the option {word[:40]} is not accepted; "
                    "list packages by name, e.g. numpy>=1.26."
                )
            continue
        if _VCS_PREFIX.match(line):
            reaches.append(_refuse(number, "a version-control URL", VCS, allowed))
            continue
        bare = line.split(";")[0].strip()
        if line.lower().startswith("file:") or (
            "@" not in bare and "://" not in bare and _LOOKS_LOCAL.search(bare)
        ):
            reaches.append(_refuse(number, "a local path or file URL", LOCAL, allowed))
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            shown = line if len(line) <= 60 else line[:57] + "..."
            raise RequirementsError(
                f"Line {number}: {shown!r} is not a package requirement; write e.g. numpy>=1.26."
            ) from None
        if requirement.url:
            url = requirement.url
            if _VCS_PREFIX.match(url):
                reaches.append(_refuse(number, "a version-control URL", VCS, allowed))
            elif url.lower().startswith("file:"):
                reaches.append(_refuse(number, "a local path or file URL", LOCAL, allowed))
            else:
                reaches.append(_refuse(number, "a direct URL", INDEX_OPTIONS, allowed))
            continue
        packages.append(str(requirement))
    if not packages and not reaches:
        raise RequirementsError("The requirements list no package.")
    return Requirements(text=text, packages=tuple(packages), reaches_outside=tuple(reaches))
