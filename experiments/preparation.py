"""A sweep's runs written after the sweep is accepted.

Accepting a sweep (experiments.sweeps.sweep_submit) checks every run and holds the quota for
all of them, stages the shared files in the first run's folder and records the sweep; it
answers at once. The runs' rows and folders are then written here, a chunk at a time, each
chunk committed with its share of the quota hold released: the sweep's page shows how far it
got. A small sweep is prepared in the request that accepts it; a large one by the worker,
which submits it when every run is written.

A run's id is derived from the sweep's and its index, so an attempt killed mid-chunk is
followed by one that writes the same folders again: no half-made run is ever visible, and
nothing is left behind.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction

from accounting.services import quota_hold_release
from audit.services import audit_record
from jobs.models import Job, JobEvent
from jobs.services import JobSpec, JobSubmissionError, StagedFiles
from plumbing.collector import collector_paused
from plumbing.db import copy_insert, new_instances

from .models import Sweep
from .plans import run_spec
from .run_folders import FOLDER_CHUNK, FOLDER_THREADS, StagedTree, copy_run_folders
from .runs import fill_run, log_sweep_events

logger = logging.getLogger(__name__)

# Rows written and committed together: the page's progress moves by this much.
PREPARE_CHUNK = 1000
# pg_try_advisory_lock's first key: preparing sweeps (the second is the sweep's pk).
LOCK_NAMESPACE = 0x5357  # "SW"


def run_public_id(sweep_public_id: uuid.UUID, index: int) -> uuid.UUID:
    """The id (and so the folder) of a sweep's run: the same at every attempt."""
    return uuid.uuid5(sweep_public_id, f"run {index}")


def run_folder(sweep_public_id: uuid.UUID, index: int) -> Path:
    return settings.JOBS_DIR / str(run_public_id(sweep_public_id, index))


def spec_to_json(spec: JobSpec) -> dict:
    data = dataclasses.asdict(spec)
    if spec.finish_by is not None:
        data["finish_by"] = spec.finish_by.isoformat()
    return data


def spec_from_json(data: dict) -> JobSpec:
    finish_by = data.get("finish_by")
    return JobSpec(
        **{**data, "finish_by": datetime.fromisoformat(finish_by) if finish_by else None}
    )


@dataclasses.dataclass(frozen=True)
class Preparation:
    """What the worker makes a sweep's runs from, as accepting it stored them."""

    spec: JobSpec
    staged: StagedFiles
    hashes: dict[str, str]
    remove_after_s: int | None
    schedd: str
    # The first run's folder as staged, before its helper files: what each run copies.
    tree: StagedTree
    # Each run's parameters, in order, as the plan gave them when the sweep was accepted
    # (PostgreSQL keeps a definition's keys in its own order, which could reorder a grid).
    runs: list[dict]

    def to_json(self) -> dict:
        return {
            "spec": spec_to_json(self.spec),
            "staged": dataclasses.asdict(self.staged),
            "tree": {
                part: sorted(str(path) for path in getattr(self.tree, part))
                for part in ("folders", "files", "shared", "jobs_own")
            },
            "hashes": self.hashes,
            "remove_after_s": self.remove_after_s,
            "schedd": self.schedd,
            "runs": self.runs,
        }

    @classmethod
    def from_json(cls, data: dict) -> Preparation:
        return cls(
            spec=spec_from_json(data["spec"]),
            staged=StagedFiles(**data["staged"]),
            hashes=data["hashes"],
            remove_after_s=data["remove_after_s"],
            schedd=data["schedd"],
            runs=data["runs"],
            tree=StagedTree(
                folders=[Path(path) for path in data["tree"]["folders"]],
                files=[Path(path) for path in data["tree"]["files"]],
                shared=frozenset(Path(path) for path in data["tree"]["shared"]),
                jobs_own=frozenset(Path(path) for path in data["tree"]["jobs_own"]),
            ),
        )


@contextmanager
def preparing_alone(sweep_pk: int):
    """Yields whether this process may prepare the sweep: no other one is. The lock is the
    connection's, so a worker that dies lets the next attempt in."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, sweep_pk])
        alone = cursor.fetchone()[0]
    try:
        yield alone
    finally:
        if alone:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, sweep_pk])


@collector_paused()
def sweep_prepare(sweep_pk: int) -> Sweep:
    """Write the runs of a sweep that has runs still to write, a chunk at a time, from where
    the last attempt stopped. Returns the sweep as it is then."""
    with preparing_alone(sweep_pk) as alone:
        sweep = Sweep.objects.select_related("owner", "lab").get(pk=sweep_pk)
        if not alone or not sweep.is_preparing:
            return sweep
        preparation = Preparation.from_json(sweep.preparation)
        try:
            while sweep.is_preparing:
                indexes = range(
                    sweep.prepared_runs,
                    min(sweep.prepared_runs + PREPARE_CHUNK, sweep.planned_runs),
                )
                written = write_chunk(sweep, preparation, indexes)
                if written.prepared_runs != indexes.stop:
                    return written  # stopped: cancelled, or a run that cannot be written
                sweep.prepared_runs, sweep.last_error = written.prepared_runs, ""
        except Exception as exc:
            # Said on the sweep's page; the task (or the sync's reconciler) tries again.
            logger.exception("writing the runs of sweep %s failed", sweep.public_id)
            Sweep.objects.filter(pk=sweep.pk).update(
                last_error=f"Writing its runs stopped at {sweep.prepared_runs:,} of "
                f"{sweep.planned_runs:,} ({type(exc).__name__}); Nightshift tries again."
            )
            raise
        return sweep


def write_chunk(sweep: Sweep, preparation: Preparation, indexes: range) -> Sweep:
    """Some of a sweep's runs, written and committed together: their folders, then their
    rows, with as much of the quota hold released. Returns the sweep as the chunk left it."""
    jobs = new_instances(
        Job,
        (
            {
                "public_id": run_public_id(sweep.public_id, index),
                "sweep_index": index,
                "parameters": preparation.runs[index],
                "output_dir": str(run_folder(sweep.public_id, index)),
            }
            for index in indexes
        ),
        owner=sweep.owner,
        lab=sweep.lab,
        gpus=preparation.spec.gpus,
        schedd=preparation.schedd,
        sweep=sweep,
    )
    # Made before the rows are filled in, not beside it: on two cores, threads making the
    # folders while the rows were written gained nothing (docs/benchmarks.md).
    targets = [job.directory for job in jobs if job.sweep_index]
    make_folders(run_folder(sweep.public_id, 0), targets, preparation.tree)
    try:
        for job in jobs:
            run = run_spec(preparation.spec, job.sweep_index, job.parameters)
            job.name = run.name.strip()
            fill_run(
                job,
                run,
                preparation.staged,
                preparation.hashes,
                user=sweep.owner,
                lab=sweep.lab,
                remove_after_s=preparation.remove_after_s,
            )
    except JobSubmissionError as exc:
        # Every run was checked when the sweep was accepted, so this is a defect: the sweep
        # stops where it is rather than failing the same way at every retry.
        remove_folders(targets)
        return sweep_stop_preparing(sweep.pk, f"Run {job.sweep_index}: {exc.message}")
    with transaction.atomic():
        locked = Sweep.objects.select_for_update().get(pk=sweep.pk)
        if locked.prepared_runs != indexes.start or locked.planned_runs < indexes.stop:
            # Cancelled meanwhile: what this chunk made is no run's.
            remove_folders(targets)
            return locked
        copy_insert(Job, jobs)
        detail = f"{preparation.staged.origin}; run {{}} of sweep “{sweep.name}”"
        events = [
            JobEvent(
                job=job,
                kind="created",
                state=job.state,
                actor=sweep.owner,
                detail=detail.format(job.sweep_index),
            )
            for job in jobs
        ]
        copy_insert(JobEvent, events)
        log_sweep_events(locked, events)
        quota_hold_release(locked.quota_hold_id, len(jobs))
        locked.prepared_runs, locked.last_error = indexes.stop, ""
        locked.save(update_fields=["prepared_runs", "last_error"])
    return locked


def make_folders(first: Path, targets: list[Path], tree: StagedTree) -> None:
    """The runs' folders, copies of the first run's, made by threads (file system calls let
    them run beside each other)."""
    with ThreadPoolExecutor(max_workers=FOLDER_THREADS) as threads:
        copies = [
            threads.submit(remake_run_folders, first, targets[n : n + FOLDER_CHUNK], tree)
            for n in range(0, len(targets), FOLDER_CHUNK)
        ]
        for copy in copies:
            copy.result()


def remake_run_folders(first: Path, targets: list[Path], tree: StagedTree) -> None:
    """A folder an earlier, killed attempt left is made again, whole."""
    remove_folders(targets)
    copy_run_folders(first, targets, tree)


def remove_folders(targets: list[Path]) -> None:
    for target in targets:
        if target.exists():
            shutil.rmtree(target)


def drop_unwritten(sweep: Sweep) -> int:
    """No more runs of a sweep (locked by the caller's transaction) will be written: it keeps
    those it has, and the quota held for the others is let go. Returns how many it drops."""
    left = sweep.planned_runs - sweep.prepared_runs
    if left:
        quota_hold_release(sweep.quota_hold_id, left)
        sweep.planned_runs = sweep.prepared_runs
        sweep.save(update_fields=["planned_runs"])
    return left


def sweep_stop_preparing(sweep_pk: int, reason: str) -> Sweep:
    """The sweep's remaining runs cannot be written: it stops where it is, saying why."""
    with transaction.atomic():
        sweep = Sweep.objects.select_for_update().get(pk=sweep_pk)
        left = drop_unwritten(sweep)
        if not left:
            return sweep
        sweep.last_error = reason
        sweep.save(update_fields=["last_error"])
        audit_record(
            action="sweep.prepare_stop",
            target=sweep,
            detail=f"{left} runs not written: {reason}",
        )
    return sweep
