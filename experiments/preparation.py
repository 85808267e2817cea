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

Where the schedd reads the portal's folders (not spooled), a large sweep's runs get empty
folders before the submit and are filled after it, a chunk at a time, each chunk's runs
waiting in HTCondor's queue until then (sweep_fill_folders): ten thousand folders made
whole would hold the submit back by seconds. Such a cluster is submitted for late
materialization: the schedd makes its jobs after taking it, each with the cluster's
folder-ready value at the time, which the last chunk sets for all of them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max

from accounting.services import quota_hold_release
from audit.services import audit_record
from jobs.models import FINAL_STATES, Job, JobEvent
from jobs.services import JobSpec, JobSubmissionError, StagedFiles, get_bridge
from plumbing.collector import collector_paused
from plumbing.db import copy_insert, new_instances

from .models import Sweep
from .plans import run_spec
from .run_folders import (
    FOLDER_CHUNK,
    FOLDER_THREADS,
    StagedTree,
    copy_run_folders,
    fill_run_folders,
)
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
    # The runs' folders are made empty before the submit and filled after it, the runs
    # waiting in HTCondor's queue meanwhile (sweep_fill_folders). Where the schedd sees the
    # portal's folders only: spooled runs send their files when they are submitted.
    folders_later: bool = False

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
            "folders_later": self.folders_later,
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
            folders_later=data.get("folders_later", False),
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
                sweep.prepared_runs, sweep.ready_runs = written.prepared_runs, written.ready_runs
                sweep.last_error = ""
        except Exception as exc:
            record_stop(sweep, "Writing its runs", sweep.prepared_runs, sweep.planned_runs, exc)
            raise
        return sweep


@collector_paused()
def sweep_fill_folders(sweep_pk: int) -> Sweep:
    """Fill the folders of a submitted sweep's runs that were made empty for its submit, a
    chunk at a time from where the last attempt stopped, and let HTCondor start each
    chunk's runs once their folders are whole. Returns the sweep as it is then."""
    with preparing_alone(sweep_pk) as alone:
        sweep = Sweep.objects.get(pk=sweep_pk)
        if not alone or not sweep.is_submitted or not sweep.is_filling_folders:
            return sweep
        preparation = Preparation.from_json(sweep.preparation)
        bridge = get_bridge(preparation.schedd)
        first = run_folder(sweep.public_id, 0)
        try:
            # An attempt killed between recording a chunk and releasing its runs.
            release_runs_before(bridge, sweep, sweep.ready_runs)
            again = True
            while sweep.is_filling_folders:
                indexes = range(
                    sweep.ready_runs, min(sweep.ready_runs + PREPARE_CHUNK, sweep.prepared_runs)
                )
                waiting = (
                    sweep.runs.filter(
                        sweep_index__gte=max(indexes.start, 1),
                        sweep_index__lt=indexes.stop,
                        cluster_id__isnull=False,
                    )
                    .exclude(state__in=FINAL_STATES)
                    .values_list("sweep_index", flat=True)
                )
                targets = [run_folder(sweep.public_id, index) for index in waiting]
                make_folders(
                    first,
                    targets,
                    preparation.tree,
                    fill=lambda some, again=again: fill_run_folders(
                        first, some, preparation.tree, again=again
                    ),
                )
                if indexes.stop == sweep.prepared_runs:
                    # Released before it is recorded, so that an attempt killed between
                    # the two releases them again: runs the schedd makes later included.
                    bridge.release_runs(sweep.cluster_id, below_proc=None)
                Sweep.objects.filter(pk=sweep.pk).update(ready_runs=indexes.stop, last_error="")
                sweep.ready_runs, sweep.last_error = indexes.stop, ""
                if sweep.is_filling_folders:
                    release_runs_before(bridge, sweep, indexes.stop)
                again = False
        except Exception as exc:
            record_stop(
                sweep, "Making its runs' folders", sweep.ready_runs, sweep.prepared_runs, exc
            )
            raise
        return sweep


def record_stop(sweep: Sweep, what: str, done: int, of: int, exc: Exception) -> None:
    """Where the worker's `what` stopped and why, said on the sweep's page; the task (or the
    sync's reconciler) tries again."""
    logger.exception("sweep %s: %s stopped", sweep.public_id, what.lower())
    Sweep.objects.filter(pk=sweep.pk).update(
        last_error=f"{what} stopped at {done:,} of {of:,} ({type(exc).__name__}); "
        "Nightshift tries again."
    )


def release_runs_before(bridge, sweep: Sweep, index: int) -> None:
    """HTCondor may start the sweep's runs before `index`: their folders are whole."""
    last_proc = sweep.runs.filter(sweep_index__lt=index, cluster_id=sweep.cluster_id).aggregate(
        last=Max("proc_id")
    )["last"]
    if last_proc is not None:
        bridge.release_runs(sweep.cluster_id, below_proc=last_proc + 1)


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
    if preparation.folders_later:
        make_empty_folders(targets)
    else:
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
        if not preparation.folders_later:
            locked.ready_runs = indexes.stop
        locked.save(update_fields=["prepared_runs", "ready_runs", "last_error"])
    return locked


def make_empty_folders(targets: list[Path]) -> None:
    """The runs' folders, empty: the schedd refuses a run whose folder does not exist. One
    an earlier, killed attempt made is taken as it is (nothing has been put in it)."""
    for target in targets:
        with contextlib.suppress(FileExistsError):
            os.mkdir(target)


def make_folders(
    first: Path,
    targets: list[Path],
    tree: StagedTree,
    fill: Callable[[list[Path]], None] | None = None,
) -> None:
    """The runs' folders, copies of the first run's, made by threads (file system calls let
    them run beside each other). `fill(targets)` instead of making them whole: what is put
    in folders that exist."""
    make = fill or (lambda some: remake_run_folders(first, some, tree))
    with ThreadPoolExecutor(max_workers=FOLDER_THREADS) as threads:
        copies = [
            threads.submit(make, targets[n : n + FOLDER_CHUNK])
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
