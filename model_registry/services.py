"""Publishing a finished job's outputs as a model version."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from audit.services import audit_record
from datasets.services import (
    NAME_PART,
    DatasetContentError,
    DatasetFile,
    StorageQuotaExceeded,
    archive_store,
    pack,
    partial_archive_path,
    storage_quota_check,
)
from experiments.selectors import default_goal, final_and_best, metric_series
from jobs.models import Job
from jobs.selectors import job_metrics, job_output_path, kept_paths
from jobs.services import job_datasets, job_metrics_path, job_models
from labs.models import Lab, Membership, Visibility

from .models import MODEL_NAME_HELP, MODEL_NAME_PATTERN, Model, ModelVersion

MAX_CARD_CHARACTERS = 20_000
MAX_MODEL_FILES = 2_000
# What a version keeps of a job's reproducibility record and its inputs.
INPUT_FIELDS = ("reference", "sha256", "size_bytes", "file_count", "kind")


class ModelError(ValueError):
    """A publication refused; `field` is the form's field it concerns."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ModelFile:
    path: str  # inside the model, '/'-separated: model.pt, tokenizer/vocab.txt
    size: int
    origin: str  # where the job wrote it: outputs/model.pt


def model_may_publish_from(user, job: Job) -> bool:
    """A job's owner publishes its outputs (staff too)."""
    return user.is_staff or job.owner_id == user.pk


def model_publish(
    *,
    user,
    job: Job,
    name: str,
    files: list[str],
    card: str = "",
    visibility: str = Visibility.PRIVATE,
    lab: Lab | None = None,
) -> ModelVersion:
    """A new version of the lab's model `name` (made on first use) from the job's chosen
    output files. The files are checked as outputs are (inside what the job keeps, no
    links), packed into a canonical archive stored by its SHA-256, and the version records
    the job's metrics and lineage. Raises ModelError with the reason."""
    if not model_may_publish_from(user, job):
        raise ModelError("job", "Only the job's owner may publish its outputs.")
    if not job.is_final or not job.outputs_ready:
        raise ModelError("job", "Publish a job's outputs once it has ended and they are ready.")
    if job.outputs_purged_at is not None:
        raise ModelError("job", "This job's outputs were removed; there is nothing to publish.")
    if not re.fullmatch(MODEL_NAME_PATTERN, name or ""):
        raise ModelError("name", f"{str(name)[:100]!r} cannot be a model's name. {MODEL_NAME_HELP}")
    if visibility not in Visibility.values:
        raise ModelError("visibility", "Choose private, lab or site.")
    if len(card) > MAX_CARD_CHARACTERS:
        raise ModelError("card", f"Keep the card under {MAX_CARD_CHARACTERS:,} characters.")
    lab = _lab_for(user, job, lab)
    if visibility == Visibility.SITE and not _leads(user, lab):
        raise ModelError(
            "visibility",
            f"Only {lab.name}'s leads (and admins) publish for "
            "everyone: choose My lab, and ask a lead.",
        )
    chosen = model_files(job, files)
    model = Model.objects.filter(lab=lab, name=name).first()
    if model is not None and not _may_add_version(user, model):
        raise ModelError(
            "name",
            f"{lab.name} has a model called {name}, and only its first publisher or "
            "the lab's leads may add versions to it: choose another name.",
        )
    total = sum(file.size for file in chosen)
    try:
        storage_quota_check(
            user=user, lab=lab if visibility == Visibility.LAB else None, adding_bytes=total
        )
    except StorageQuotaExceeded as exc:
        raise ModelError("files", str(exc)) from None
    listed = [DatasetFile(file.path, file.size) for file in chosen]
    sources = {file.path: file.origin for file in chosen}
    try:
        digest = archive_store(
            partial_archive_path(),
            lambda out: pack(job.directory, listed, out, sources=sources),
        )
    except DatasetContentError as exc:
        raise ModelError("files", str(exc)) from None
    with transaction.atomic():
        model, _ = Model.objects.select_for_update().get_or_create(
            lab=lab, name=name, defaults={"created_by": user}
        )
        number = (model.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        version = ModelVersion.objects.create(
            model=model,
            number=number,
            card=card,
            visibility=visibility,
            sha256=digest.sha256,
            size_bytes=digest.size_bytes,
            file_count=digest.file_count,
            files=[{"path": f.path, "size": f.size, "from": f.origin} for f in chosen],
            metrics=job_final_and_best_metrics(job),
            lineage=job_lineage(job),
            job=job,
            published_by=user,
        )
        audit_record(
            action="model.publish",
            actor=user,
            target=model,
            detail=f"{version.reference} from job {job.public_id} sha256:{digest.sha256}",
        )
    return version


def _lab_for(user, job: Job, lab: Lab | None) -> Lab:
    lab = lab or job.lab
    if lab is None:
        raise ModelError("lab", "A model belongs to a lab: choose one of yours.")
    if not user.is_staff and not Membership.objects.filter(lab=lab, user=user).exists():
        raise ModelError("lab", f"You are not a member of {lab.name}.")
    return lab


def _leads(user, lab: Lab) -> bool:
    return (
        user.is_staff
        or Membership.objects.filter(lab=lab, user=user, role=Membership.Role.LEAD).exists()
    )


def _may_add_version(user, model: Model) -> bool:
    return model.created_by_id == user.pk or _leads(user, model.lab)


def model_files(job: Job, paths: list[str]) -> list[ModelFile]:
    """The chosen output files, each checked to be a plain file inside what the job keeps,
    named inside the model without the kept folder they came from (outputs/model.pt is
    model.pt)."""
    wanted = list(dict.fromkeys(str(path).strip() for path in paths or [] if str(path).strip()))
    if not wanted:
        raise ModelError("files", "Choose the output files the model is made of.")
    if len(wanted) > MAX_MODEL_FILES:
        raise ModelError("files", f"A model holds at most {MAX_MODEL_FILES:,} files.")
    folders = {name for name in kept_paths(job) if (job.directory / name).is_dir()}
    chosen: dict[str, ModelFile] = {}
    total = 0
    for origin in wanted:
        found = job_output_path(job, origin)
        if found is None:
            raise ModelError(
                "files",
                f"{origin[:200]!r} is not one of the job's output files (links and "
                "files outside its outputs are never published).",
            )
        parts = PurePosixPath(origin).parts
        inside = "/".join(parts[1:]) if parts[0] in folders and len(parts) > 1 else origin
        if any(not NAME_PART.fullmatch(part) for part in inside.split("/")):
            raise ModelError("files", f"{origin[:200]!r}: this name cannot be used in a model.")
        if inside in chosen:
            raise ModelError(
                "files",
                f"{origin} and {chosen[inside].origin} would both be "
                f"{inside} in the model: choose one.",
            )
        size = found.stat().st_size
        chosen[inside] = ModelFile(inside, size, origin)
        total += size
    if total > settings.DATASET_MAX_GB * 2**30:
        raise ModelError("files", f"A model holds at most {settings.DATASET_MAX_GB:g} GB.")
    return sorted(chosen.values(), key=lambda file: file.path)


def job_final_and_best_metrics(job: Job) -> dict:
    """Each metric's value at the job's last step that logged it, and its best value (the
    lowest for losses and errors, the highest for anything else) with the step of it."""
    logged = job_metrics(job.directory, job_metrics_path(job))
    final, best = {}, {}
    for name in logged.names:
        goal = default_goal(name)
        last, step, value = final_and_best(metric_series(logged.rows, name), goal)
        if last is None:
            continue
        final[name] = last
        best[name] = {"value": value, "step": step, "goal": goal}
    return {"final": final, "best": best}


def job_lineage(job: Job) -> dict:
    """What made the model, kept with the version even if the job is deleted later."""
    request = job.request or {}
    return {
        "job": {
            "id": str(job.public_id),
            "name": job.name,
            "owner": job.owner.get_username(),
            "finished_at": job.finished_at.isoformat() if job.finished_at else None,
            "workstation": job.workstation,
            "gpu_model": job.gpu_model,
        },
        "environment": job.source.get("environment"),
        "datasets": [{k: d[k] for k in INPUT_FIELDS if k in d} for d in job_datasets(job)],
        "models": [{k: d[k] for k in INPUT_FIELDS if k in d} for d in job_models(job)],
        "reproducibility": {
            "sha256": job.source.get("sha256") or {},
            "entry_command": job.source.get("entry_command"),
            "arguments": list(request.get("arguments") or []),
            "seed": job.seed,
            "parameters": job.parameters,
            "container_image": request.get("container_image"),
            "python": request.get("python"),
        },
    }
