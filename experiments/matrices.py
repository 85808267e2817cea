"""Evaluation matrices: every system (a script or project) run on every dataset, as one sweep
submitted as one cluster."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from condor_bridge import InvalidJobRequest
from condor_bridge.types import check_text
from jobs.models import Job
from jobs.services import (
    MODELS_FOLDER,
    ArchiveError,
    JobSpec,
    JobSubmissionError,
    archive_limits,
    check_archive,
    check_may_submit,
    content_hashes,
    extract_archive,
    install_helper,
    is_archive,
    job_validate_request,
    model_prepare,
    safe_archive_name,
    save_upload,
    stage_files,
)

from .models import Sweep
from .plans import check_placeholders, run_spec
from .run_folders import copy_inputs, staged_tree
from .runs import check_runs, fill_run, new_folder
from .sweeps import record_sweep

DATASET_FOLDER = "dataset"


_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.+=@-]+")


MAX_MATRIX_NAME = 100


@dataclass(frozen=True)
class MatrixSystem:
    """One system under evaluation: its own script or project, and how to start it."""

    name: str
    upload: object  # an UploadedFile: a .py script or a project archive
    entry_command: str | None = None
    # A published model (LAB/NAME[@VERSION]) the system is: its run gets the model at
    # models/NAME/, which {model} names; systems of models usually share one evaluator.
    model: str | None = None


@dataclass(frozen=True)
class MatrixDataset:
    """One dataset: a path the workstations see, or an uploaded file or archive."""

    name: str
    path: str | None = None
    upload: object | None = None

    @property
    def location(self) -> str:
        """What `{dataset}` becomes: the path, or the folder its upload is unpacked into."""
        return self.path if self.path is not None else DATASET_FOLDER


def _check_names(kind: str, names: list[str]) -> None:
    if not names:
        raise JobSubmissionError(kind, f"Give at least one {kind[:-1]}.")
    for name in names:
        try:
            check_text(kind, name, max_length=MAX_MATRIX_NAME)
        except InvalidJobRequest as exc:
            raise JobSubmissionError(kind, f"{name[:40]!r}: {exc.message}.") from None
        if not name.strip():
            raise JobSubmissionError(kind, f"Every {kind[:-1]} needs a name.")
    if len(set(names)) != len(names):
        raise JobSubmissionError(kind, f"Two {kind} have the same name.")


def _stage_dataset(dataset: MatrixDataset, folder: Path) -> None:
    """An uploaded dataset, unpacked (an archive) or kept as it is, into `folder`."""
    folder.mkdir(parents=True)
    name = dataset.upload.name or "data"
    if is_archive(name):
        archive = folder.parent / f"{folder.name}-{safe_archive_name(name)}"
        save_upload(dataset.upload, archive)
        try:
            check_archive(archive, archive_limits())
            extract_archive(archive, folder, archive_limits())
        except ArchiveError as exc:
            raise JobSubmissionError("datasets", f"{dataset.name}: {exc}") from None
        finally:
            archive.unlink(missing_ok=True)
    else:
        save_upload(dataset.upload, folder / _SAFE_NAME.sub("_", Path(name).name)[:100])


def _link_tree(source: Path, target: Path) -> None:
    """A dataset into a run's folder: hard links, since datasets can be large and are the
    portal's, read-only to jobs."""
    shutil.copytree(source, target, copy_function=os.link)


def _model_folders(user, systems: list[MatrixSystem]) -> dict[str, str]:
    """Each model system's folder in its runs (models/NAME), its model checked to be one
    the user may use, before anything is staged."""
    folders = {}
    for system in systems:
        if system.model:
            try:
                [record] = model_prepare(user=user, references=[system.model])
            except JobSubmissionError as exc:
                raise JobSubmissionError("systems", f"{system.name}: {exc.message}") from None
            folders[system.name] = f"{MODELS_FOLDER}/{record['name']}"
    return folders


def matrix_submit(
    *,
    user,
    spec: JobSpec,
    systems: list[MatrixSystem],
    datasets: list[MatrixDataset],
    check_pool: bool = True,
) -> Sweep:
    """Accept an evaluation matrix: every system run on every dataset, as one sweep.

    A system is its own upload and entry command, and may be a published model (its runs
    get it at models/NAME/); `{dataset}` in the entry command or the arguments becomes the
    dataset's path (or `dataset`, the folder an uploaded dataset is unpacked into in each
    run's folder), `{system}` the system's name, and `{model}` a model system's folder.
    """
    _check_names("systems", [system.name for system in systems])
    _check_names("datasets", [dataset.name for dataset in datasets])
    for system in systems:
        check_may_submit(user, script=system.upload, copy_from=None)
    for dataset in datasets:
        if (dataset.path is None) == (dataset.upload is None):
            raise JobSubmissionError("datasets", f"{dataset.name}: give a path or a file.")
        if dataset.path is not None:
            try:
                check_text("datasets", dataset.path, max_length=1000)
            except InvalidJobRequest as exc:
                raise JobSubmissionError("datasets", f"{dataset.name}: {exc.message}.") from None
    if len(systems) * len(datasets) > settings.MAX_SWEEP_RUNS:
        raise JobSubmissionError(
            "datasets",
            f"{len(systems)} systems by {len(datasets)} datasets "
            f"make {len(systems) * len(datasets):,} runs; at most "
            f"{settings.MAX_SWEEP_RUNS:,} are allowed.",
        )
    job_validate_request(user=user, spec=spec)
    folders = _model_folders(user, systems)
    cells = [(system, dataset) for system in systems for dataset in datasets]
    run_specs = []
    for index, (system, dataset) in enumerate(cells):
        system_spec = dataclasses.replace(spec, entry_command=system.entry_command)
        values = {"system": system.name, "dataset": dataset.location}
        if system.model:
            system_spec = dataclasses.replace(system_spec, models=[*spec.models, system.model])
            values["model"] = folders[system.name]
        check_placeholders(system_spec, set(values))
        run_specs.append(run_spec(system_spec, index, values))
    lab, remove_after_s = check_runs(user, spec, run_specs, check_pool=check_pool)
    sweep = Sweep(
        owner=user,
        lab=lab,
        name=spec.name.strip(),
        kind=Sweep.Kind.MATRIX,
        definition={
            "systems": [
                {
                    "name": s.name,
                    "entry_command": s.entry_command,
                    **({"model": s.model} if s.model else {}),
                }
                for s in systems
            ],
            "datasets": [
                {"name": d.name, "path": d.path, "file": d.upload.name if d.upload else None}
                for d in datasets
            ],
        },
    )
    jobs = [
        Job(
            owner=user,
            name=run.name.strip(),
            lab=lab,
            gpus=spec.gpus,
            sweep_index=index,
            parameters={"system": system.name, "dataset": dataset.name},
        )
        for index, (run, (system, dataset)) in enumerate(zip(run_specs, cells, strict=True))
    ]
    made: list[Path] = []
    staging = settings.JOBS_DIR / ".staging" / f"matrix-{uuid.uuid4().hex}"
    try:
        for number, dataset in enumerate(datasets):
            if dataset.upload is not None:
                _stage_dataset(dataset, staging / str(number))
        origins = []
        for s_number, system in enumerate(systems):
            first_index = s_number * len(datasets)
            first = new_folder(jobs[first_index], made)
            staged = stage_files(
                first, spec=run_specs[first_index], script=system.upload, copy_from=None, user=user
            )
            if (first / DATASET_FOLDER).exists():
                raise JobSubmissionError(
                    "systems",
                    f"{system.name} has a {DATASET_FOLDER} folder of its own; "
                    "rename it, since each run's dataset is unpacked there.",
                )
            origins.append(f"{system.name}: {staged.origin}")
            tree, hashes = staged_tree(first), content_hashes(first, staged)
            for d_number, dataset in enumerate(datasets):
                job = jobs[first_index + d_number]
                if d_number:
                    copy_inputs(first, new_folder(job, made, create=False), tree)
                uploaded = dataset.upload is not None
                if uploaded:
                    _link_tree(staging / str(d_number), job.directory / DATASET_FOLDER)
                fill_run(
                    job,
                    run_specs[first_index + d_number],
                    staged,
                    hashes,
                    user=user,
                    lab=lab,
                    remove_after_s=remove_after_s,
                    extra_inputs=(DATASET_FOLDER,) if uploaded else (),
                )
            install_helper(first, software=staged.software, datasets=staged.datasets)
            for d_number in range(1, len(datasets)):
                install_helper(jobs[first_index + d_number].directory, link_from=first)
        record_sweep(user, lab, spec, sweep, jobs, origin="; ".join(origins))
    except BaseException:
        for directory in made:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return sweep
