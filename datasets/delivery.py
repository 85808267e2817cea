"""Datasets in jobs: what the job form offers, the records a job's launcher gets for the
datasets it names, and the archives the portal sends to workstations for those jobs."""

from __future__ import annotations

import re
from urllib.parse import quote

from django.conf import settings
from django.http import FileResponse, HttpResponse
from django.urls import reverse

from jobs.models import Job
from jobs.services import DataChoice, JobSubmissionError, job_for_data_credential, job_inputs
from plumbing.names import AmbiguousName, needs_qualifying, qualified_name

from . import storage
from .models import Dataset, DatasetDelivery, DatasetVersion
from .selectors import dataset_get_visible, dataset_list_visible_to

# OWNER/ is there only where several owners offer the name (plumbing.names).
REFERENCE = re.compile(
    r"(?:(?P<owner>[\w.@+-]{1,150})/)?"
    r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,79})(?:@(?P<number>[0-9]{1,9}))?",
    re.ASCII,
)
_WORKSTATION = re.compile(r"[^A-Za-z0-9@._:-]+")


def size_text(size_bytes: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:,.1f} {unit}"
    return f"{size_bytes} bytes"


def version_record(version: DatasetVersion) -> dict:
    """What jobs keep of a version (Job.source["datasets"]) and the launcher reads."""
    record = {
        "name": version.dataset.name,
        "reference": version.reference,
        "dataset_id": version.dataset_id,
        "version_id": version.pk,
        "sha256": version.sha256,
        "size_bytes": version.size_bytes,
        "file_count": version.file_count,
    }
    if version.is_shared_path:
        return {**record, "kind": "shared", "path": version.shared_path}
    return {**record, "kind": "archive", "url": delivery_url(version.sha256)}


def delivery_url(sha256: str) -> str:
    """Where a job's launcher fetches the stored archive `sha256`, with its credential."""
    base = (settings.DATASET_DELIVERY_URL or settings.PORTAL_URL).rstrip("/")
    return base + reverse("api:dataset-delivery", kwargs={"sha256": sha256})


class DatasetCatalogue:
    """The datasets app's side of jobs.inputs."""

    def choices(self, user) -> list[DataChoice]:
        choices = []
        datasets = list(dataset_list_visible_to(user).prefetch_related("versions"))
        ambiguous = needs_qualifying(datasets, user_id=user.pk)
        for dataset in datasets:
            latest = max(dataset.versions.all(), key=lambda v: v.number, default=None)
            if latest is None:
                continue
            whose = "" if dataset.owner_id == user.pk else f", {dataset.owner.get_username()}'s"
            choices.append(
                DataChoice(
                    reference=qualified_name(dataset)
                    if dataset.name in ambiguous
                    else dataset.name,
                    label=f"{dataset.name} (version {latest.number}, "
                    f"{size_text(latest.size_bytes)}, {latest.file_count:,} files{whose})",
                )
            )
        return choices

    def prepare(self, *, user, references: list[str]) -> list[dict]:
        records: dict[str, dict] = {}
        for raw in references:
            text = str(raw).strip()
            match = REFERENCE.fullmatch(text)
            if match is None:
                raise JobSubmissionError(
                    "datasets",
                    f"{text[:100]!r} is not a dataset: give NAME or NAME@VERSION "
                    "(letters, digits and . _ -).",
                )
            name, number = match["name"], match["number"]
            named = f"{match['owner']}/{name}" if match["owner"] else name
            try:
                dataset = dataset_get_visible(user, named)
            except AmbiguousName as exc:
                raise JobSubmissionError("datasets", str(exc)) from None
            if dataset is None:
                raise JobSubmissionError(
                    "datasets",
                    f"There is no dataset {named} that you may use; the datasets "
                    "page lists yours, your labs' and the site's.",
                )
            version = _version(dataset, number)
            if name in records:
                raise JobSubmissionError("datasets", f"{name} is named twice: give it once.")
            _check_stored(version)
            records[name] = version_record(version)
        return list(records.values())


def _version(dataset: Dataset, number: str | None) -> DatasetVersion:
    versions = dataset.versions.select_related("dataset")
    version = versions.filter(number=int(number)).first() if number else versions.first()
    if version is None:
        known = ", ".join(str(n) for n in versions.values_list("number", flat=True)) or "none"
        wanted = f"version {number}" if number else "version yet"
        raise JobSubmissionError(
            "datasets", f"{dataset.name} has no {wanted}; its versions: {known}."
        )
    return version


def _check_stored(version: DatasetVersion) -> None:
    if version.is_shared_path:
        if not storage.shared_folder_exists(version.shared_path):
            raise JobSubmissionError(
                "datasets",
                f"{version.reference} was registered from {version.shared_path}, "
                "which is gone from the shared file system.",
            )
    elif not storage.archive_path(version.sha256).is_file():
        raise JobSubmissionError("datasets", f"{version.reference} is no longer stored.")


CATALOGUE = DatasetCatalogue()


class DeliveryRefused(Exception):
    """A request for an archive that is not sent; `status` and the message say why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def dataset_delivery(
    *, credential: str, sha256: str, workstation: str, remote_address: str | None
) -> HttpResponse:
    """The archive `sha256` for the job whose credential this is, if the job was given it;
    each delivery is recorded. Behind nginx the bytes are nginx's to send."""
    job = job_for_data_credential(credential) if credential else None
    if job is None:
        raise DeliveryRefused(
            401, "This credential is not valid: it is damaged or expired, or its job has ended."
        )
    given = next(
        (d for d in job_inputs(job) if d.get("kind") == "archive" and d["sha256"] == sha256), None
    )
    if given is None:
        raise DeliveryRefused(404, "This job was not given that dataset.")
    archive = storage.archive_path(sha256)
    try:
        size = archive.stat().st_size
    except FileNotFoundError:
        raise DeliveryRefused(404, f"{given['reference']} is no longer stored.") from None
    _record(job, given, size, workstation, remote_address)
    if settings.DATASET_ACCEL_REDIRECT_PREFIX:
        response = HttpResponse(content_type="application/x-tar")
        response["X-Accel-Redirect"] = settings.DATASET_ACCEL_REDIRECT_PREFIX + quote(archive.name)
    else:
        response = FileResponse(open(archive, "rb"), content_type="application/x-tar")  # noqa: SIM115 - FileResponse closes it
    response["X-Checksum-Sha256"] = sha256
    return response


def _record(job: Job, given: dict, size: int, workstation: str, remote_address) -> None:
    DatasetDelivery.objects.create(
        version=DatasetVersion.objects.filter(
            pk=given.get("version_id"), sha256=given["sha256"]
        ).first(),
        sha256=given["sha256"],
        job=job,
        size_bytes=size,
        workstation=_WORKSTATION.sub("_", workstation)[:200],
        remote_address=remote_address,
    )
