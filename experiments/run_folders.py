"""A sweep's run folders: the first run's staged files, copied or linked into the others
so that a thousand runs cost one upload."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from condor_bridge.submit import DEFAULT_OUTPUT_DIR as OUTPUTS
from condor_bridge.submit import HELPER_DIR
from jobs.services import SOURCE_DIR, install_helpers_linked, link_or_copy


@dataclass(frozen=True)
class StagedTree:
    """What the first run's folder holds (relative to it), for the other runs' copies."""

    folders: list[Path]
    files: list[Path]
    # Files the runs share by hard links instead of copies (see jobs_cannot_write).
    shared: frozenset[Path]
    # What the jobs' account owns there (a project's files, unpacked for the jobs): each
    # run's copy is given to that account too.
    jobs_own: frozenset[Path]


def staged_tree(folder: Path) -> StagedTree:
    """The folders and files staged in the first run's folder, relative to it."""
    folders, files = [], []
    for root, dirnames, filenames in os.walk(folder):
        base = Path(root).relative_to(folder)
        folders += [base / name for name in dirnames]
        files += [base / name for name in filenames]
    job_uid = settings.JOB_DIR_UID
    jobs_own = frozenset(
        path
        for path in (*folders, *files)
        if job_uid is not None and (folder / path).lstat().st_uid == job_uid
    )
    shared = frozenset(
        file for file in files if file.parent.name == SOURCE_DIR or jobs_cannot_write(folder / file)
    )
    return StagedTree(folders, files, shared, jobs_own)


def jobs_cannot_write(path: Path) -> bool:
    """Whether no job can change this file: jobs run as another account than the portal's
    (NIGHTSHIFT_JOB_DIR_UID), which neither owns it nor may write it. Only then may runs
    share it: a file a run could write (a project's, unpacked for the jobs' account) would
    change under every other run."""
    status = path.lstat()
    job_uid = settings.JOB_DIR_UID
    return (
        job_uid is not None
        and job_uid != os.geteuid()
        and status.st_uid != job_uid
        and stat.S_ISREG(status.st_mode)
        and not status.st_mode & 0o022
    )


# Two threads made a sweep's folders fastest on a 2-core machine; more only contend.
FOLDER_THREADS = 2
FOLDER_CHUNK = 250


def copy_run_folders(first: Path, targets: list[Path], tree: StagedTree) -> None:
    """The other runs' folders of a sweep, each a copy of the first run's with its helper."""
    for target in targets:
        copy_inputs(first, target, tree)
    install_helpers_linked(first, targets)


def fill_run_folders(first: Path, targets: list[Path], tree: StagedTree, *, again: bool) -> None:
    """The files of runs whose folders were made empty for their submit (see
    experiments.preparation), as copy_run_folders makes them. `again`: an earlier attempt
    may have been killed while filling them; what it left is made again, and anything else
    there (HTCondor's log of the run) is kept."""
    if again:
        names = {path.parts[0] for path in (*tree.folders, *tree.files)} | {OUTPUTS, HELPER_DIR}
        for target in targets:
            for name in names:
                remove_entry(target / name)
    for target in targets:
        copy_inputs(first, target, tree, folder_made=True)
    install_helpers_linked(first, targets)


def remove_entry(path: Path) -> None:
    """A file, link or folder (with what it holds) gone; nothing done if there is none."""
    try:
        os.unlink(path)
    except IsADirectoryError:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass


def copy_inputs(source: Path, target: Path, tree: StagedTree, *, folder_made: bool = False) -> None:
    """A run's folder from the first run's staged files. What no job can write is linked,
    not copied (the kept project archive, which can be large; a script the portal owns):
    each file system call counts, at 10,000 runs, and more on a network file system."""
    if not folder_made:
        os.mkdir(target)
    for folder in tree.folders:
        os.mkdir(target / folder)
    for file in tree.files:
        if file in tree.shared:
            link_or_copy(source / file, target / file)
        else:
            shutil.copyfile(source / file, target / file)
    for path in tree.jobs_own:
        os.chown(target / path, settings.JOB_DIR_UID, -1)


# Accepting and submitting 10,000 runs makes objects that live until the end: the cycle
# collector would walk them again and again (0.8 s of a 10,000-run sweep, docs/benchmarks.md).
