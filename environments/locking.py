"""Resolve a checked specification once into a lock: exact versions with their hashes.

The portal runs `uv pip compile --generate-hashes --no-build` as an argument list, on the
package lines only (never the user's file), against the site's index. `--no-build` keeps
package code off the portal: only wheels' metadata is read, so a package that has no wheel
for the chosen Python is refused here, with the reason, before any job is submitted.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from packaging.utils import canonicalize_name

from .requirements import Requirements

_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)", re.MULTILINE)


class LockError(Exception):
    """The specification could not be resolved; `explanation` says why in plain words and
    `output` is uv's own report."""

    def __init__(self, explanation: str, output: str) -> None:
        super().__init__(explanation)
        self.explanation = explanation
        self.output = output


@dataclass(frozen=True)
class Lock:
    text: str
    sha256: str
    packages: tuple[tuple[str, str], ...]  # (name, version), as resolved


def lock_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def pinned_packages(lock_text: str) -> tuple[tuple[str, str], ...]:
    return tuple((m.group(1), m.group(3)) for m in _PINNED.finditer(lock_text))


def pinned_names(lock_text: str) -> frozenset[str]:
    """The packages a lock pins, by their normalised names (PEP 503: `Jupyter_Lab` is
    `jupyter-lab`)."""
    return frozenset(canonicalize_name(name) for name, _ in pinned_packages(lock_text))


def _lock_body(output: str) -> str:
    """uv's lock without its header comments, which name a temporary file."""
    lines = output.splitlines()
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        lines.pop(0)
    return "\n".join(lines).strip() + "\n"


def explain_failure(output: str, *, python_version: str) -> str:
    """uv's report of a failed resolution or install, in the words a student needs."""
    names = re.findall(
        r"Because (?:there is no version of )?([A-Za-z0-9._-]+(?:[=<>!~]=[^\s,]+)?)", output
    ) or re.findall(r"`([A-Za-z0-9._-]+(?:[=<>!~]=[^\s`]+)?)`", output)
    name = names[0] if names else "a package"
    bare = re.split(r"[=<>!~]", name)[0]
    if "was not found in the package registry" in output or "not found in the package" in output:
        return (
            f"No package called {bare} exists on the package index. Check its spelling; "
            "the name to install can differ from the name you import (e.g. scikit-learn "
            "for sklearn)."
        )
    if "there is no version of" in output:
        return (
            f"No version of {name} matches what you asked for. Loosen the version, "
            "or check the versions the package index offers."
        )
    if (
        "has no usable wheels" in output
        or "requires-python" in output.lower()
        or ("Python" in output and "requires" in output and "only" in output)
    ):
        return (
            f"{name} has no ready-built package for Python {python_version} on Linux: "
            "that version of it was made for other Pythons, or only as source code that "
            f"would need a compiler. Pick a version of {bare} that supports Python "
            f"{python_version}, or choose another Python for the environment."
        )
    if re.search(
        r"Failed to build|command '(gcc|cc|g\+\+|c\+\+)' failed|"
        r"(gcc|cc|g\+\+): (command )?not found|error: Microsoft Visual|"
        r"Unable to find a compiler|could not find a C compiler",
        output,
        re.I,
    ):
        return (
            f"{name} has to be compiled from source, and building it failed: it needs a "
            "compiler and libraries the workstation lacks. Choose a version that has a "
            "ready-built package (wheel), or ask your administrator for a site "
            "environment that contains it."
        )
    if re.search(
        r"(timed out|Connection refused|dns error|Failed to fetch|"
        r"certificate|network)",
        output,
        re.I,
    ):
        return (
            "The package index could not be reached from the portal; nothing is wrong "
            "with your requirements. Try again in a few minutes."
        )
    if "unsatisfiable" in output or "No solution found" in output:
        return (
            "These requirements contradict each other: no set of versions satisfies "
            "all of them. uv's report below names the packages involved."
        )
    return "The requirements could not be resolved; uv's report below says why."


def uv_environment() -> dict[str, str]:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key
        in (
            "PATH",
            "HOME",
            "SSL_CERT_FILE",
            "SSL_CERT_DIR",
            "HTTPS_PROXY",
            "HTTP_PROXY",
            "NO_PROXY",
            "https_proxy",
            "http_proxy",
            "no_proxy",
            "UV_NATIVE_TLS",
        )
    }
    environment["UV_CACHE_DIR"] = str(settings.ENVIRONMENT_UV_CACHE_DIR)
    environment["UV_NO_CONFIG"] = "1"
    return environment


def lock_resolve(requirements: Requirements, *, python_version: str) -> Lock:
    """The lock for `requirements` on Linux with `python_version`; LockError if none."""
    if not requirements.lockable:
        raise ValueError("a specification that reaches outside the index is not locked")
    with tempfile.TemporaryDirectory(prefix="nightshift-lock-") as folder:
        spec = Path(folder) / "requirements.in"
        spec.write_text("\n".join(requirements.packages) + "\n")
        command = [
            settings.ENVIRONMENT_UV,
            "pip",
            "compile",
            str(spec),
            "--quiet",
            "--generate-hashes",
            "--no-build",
            "--no-header",
            "--no-annotate",
            "--python-version",
            python_version,
            "--python-platform",
            "linux",
            # Resolve for that version with the portal's own interpreter: never fetch one.
            "--python",
            sys.executable,
            "--no-python-downloads",
            "--index-url",
            settings.PACKAGE_INDEX_URL or "https://pypi.org/simple",
        ]
        try:
            # An argument list, never a shell; the user's text is only in the file.
            result = subprocess.run(  # noqa: S603
                command,
                capture_output=True,
                text=True,
                cwd=folder,
                env=uv_environment(),
                timeout=settings.ENVIRONMENT_LOCK_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise LockError(
                f"Resolving the requirements took longer than "
                f"{settings.ENVIRONMENT_LOCK_TIMEOUT_S} s; the package index may be slow. "
                "Try again in a few minutes.",
                "",
            ) from None
        except FileNotFoundError:
            raise LockError(
                "The portal cannot resolve requirements: uv is not installed "
                f"({settings.ENVIRONMENT_UV}). Tell your administrator.",
                "",
            ) from None
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip()
        raise LockError(explain_failure(output, python_version=python_version), output[-4000:])
    text = _lock_body(result.stdout)
    return Lock(text=text, sha256=lock_sha256(text), packages=pinned_packages(text))
