"""The software a job runs with, handed in by the app that keeps environments.

jobs knows only what a job needs on the workstation: a Python (or a container image) and,
optionally, a lock of exact packages with their hashes that the launcher installs (once per
workstation, into the shared environment cache). Which environments exist, who may use
them, and how a requirements.txt becomes a lock belong to the `environments` app, which
registers its catalogue here at startup (`software_catalogue_register`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from condor_bridge.submit import HELPER_DIR

# In the helper folder: what the launcher installs, and what it says it installed.
LOCK_FILE = "requirements.lock"
ENVIRONMENT_FILE = "environment.json"


@dataclass(frozen=True)
class PreparedSoftware:
    """What the preparer decided for one job.

    `record` describes it for the job's page and reproducibility record (environment name,
    version, lock hash...). `lock` is the text the launcher installs; None runs the job's
    requirements.txt as before (a specification the site lets reach outside the index) or
    nothing. `python` and `container_image` replace the spec's when set.
    """

    record: dict = field(default_factory=dict)
    lock: str | None = None
    python: str | None = None
    container_image: str | None = None


@dataclass(frozen=True)
class SoftwareChoice:
    """An environment a user may pick, as the job form and the API show it."""

    reference: str  # NAME@VERSION
    label: str
    description: str = ""
    python: str | None = None
    container_image: str | None = None
    is_default: bool = False
    # The packages its lock pins, by normalised name; empty where unknown (an image).
    packages: frozenset[str] = frozenset()
    # The site's own (made by its administrators for everyone), rather than a lab's or a
    # person's.
    is_site: bool = False


class SoftwareNotFound(LookupError):
    """No environment by that reference that the user may use; the message says what is."""


class SoftwareCatalogue(Protocol):
    def choices(self, user) -> list[SoftwareChoice]: ...

    def lookup(self, user, reference: str) -> SoftwareChoice: ...

    def prepare(
        self, *, user, spec, directory: Path, has_requirements_file: bool
    ) -> PreparedSoftware | None:
        """The software for one job whose files are in `directory`; raises
        specs.JobSubmissionError with the reason when it cannot be had."""


_catalogues: list[SoftwareCatalogue] = []


def software_catalogue_register(catalogue: SoftwareCatalogue) -> None:
    if catalogue not in _catalogues:
        _catalogues.append(catalogue)


def software_choices(user) -> list[SoftwareChoice]:
    return [choice for catalogue in _catalogues for choice in catalogue.choices(user)]


def software_lookup(user, reference: str) -> SoftwareChoice:
    if not _catalogues:
        raise SoftwareNotFound("This portal offers no software environments.")
    return _catalogues[0].lookup(user, reference)


def software_prepare(
    *, user, spec, directory: Path, has_requirements_file: bool
) -> PreparedSoftware | None:
    for catalogue in _catalogues:
        prepared = catalogue.prepare(
            user=user, spec=spec, directory=directory, has_requirements_file=has_requirements_file
        )
        if prepared is not None:
            return prepared
    return None


def software_install(directory: Path, software: dict | None) -> None:
    """Write the lock and its description into a job's helper folder, for the launcher.
    `software` is a PreparedSoftware as a dict (StagedFiles keeps it so, for studies)."""
    if not software or not software.get("lock"):
        return
    helper = directory / HELPER_DIR
    (helper / LOCK_FILE).write_text(software["lock"])
    (helper / ENVIRONMENT_FILE).write_text(json.dumps(software["record"], sort_keys=True))
