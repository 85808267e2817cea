"""The datasets a job reads, handed in by the app that keeps datasets.

jobs knows only what the launcher needs on the workstation: for each dataset, the folder
name it gets (datasets/<name>/), its content's SHA-256, size and file count, and where the
bytes are: the portal's delivery URL, or a folder on a shared file system. Which datasets
exist, who may use them and how they are stored belong to the `datasets` app, which
registers its catalogue here at startup (`data_catalogue_register`).

A job fetches its datasets with its own credential (.nightshift/credential), which is good
only while the job has not ended, and at most DATASET_CREDENTIAL_MAX_AGE_S.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from django.conf import settings
from django.core import signing
from django.db.models import Q, QuerySet

from condor_bridge.submit import DATA_TRANSFER_SCHEME, HELPER_DIR

from .errors import JobSubmissionError
from .models import FINAL_STATES, Job

# In the helper folder: the datasets the launcher puts in place, and the job's credential.
DATASETS_MANIFEST = "datasets.json"
CREDENTIAL_FILE = "credential"
# The folder in the job's working directory where each dataset appears.
DATASETS_FOLDER = "datasets"
MAX_DATASETS_PER_JOB = 8
_CREDENTIAL_SALT = "nightshift.jobs.dataset-delivery"


@dataclass(frozen=True)
class DataChoice:
    """A dataset (or published model) a user may attach, as the job form shows it."""

    reference: str  # NAME (its latest version); a model's LAB/NAME@VERSION
    label: str


class DataCatalogue(Protocol):
    def choices(self, user) -> list[DataChoice]: ...

    def prepare(self, *, user, references: list[str]) -> list[dict]:
        """One record per reference (NAME or NAME@VERSION): name, reference, version_id,
        sha256, size_bytes, file_count, kind ("archive" or "shared"), and url or path.
        Raises specs.JobSubmissionError("datasets", ...) with the reason."""


class InputCatalogues:
    """The catalogues of one kind of input that the apps above hand in at startup: the
    first resolves references, and all offer choices."""

    def __init__(self, field: str, *, limit: int, none_offered: str) -> None:
        self.field = field
        self.limit = limit
        self.none_offered = none_offered
        self._catalogues: list[DataCatalogue] = []

    def register(self, catalogue: DataCatalogue) -> None:
        if catalogue not in self._catalogues:
            self._catalogues.append(catalogue)

    def choices(self, user) -> list[DataChoice]:
        return [choice for catalogue in self._catalogues for choice in catalogue.choices(user)]

    def prepare(self, *, user, references: list[str]) -> list[dict]:
        if not references:
            return []
        if not self._catalogues:
            raise JobSubmissionError(self.field, self.none_offered)
        if len(references) > self.limit:
            raise JobSubmissionError(
                self.field, f"A job may use at most {self.limit} {self.field}."
            )
        return self._catalogues[0].prepare(user=user, references=list(references))


DATASET_CATALOGUES = InputCatalogues(
    "datasets", limit=MAX_DATASETS_PER_JOB, none_offered="This portal offers no datasets."
)


def data_catalogue_register(catalogue: DataCatalogue) -> None:
    DATASET_CATALOGUES.register(catalogue)


def data_choices(user) -> list[DataChoice]:
    return DATASET_CATALOGUES.choices(user)


def data_prepare(*, user, references: list[str]) -> list[dict]:
    return DATASET_CATALOGUES.prepare(user=user, references=references)


# Published models a job reads appear, read-only, at models/<name>/; they travel as datasets
# do (the same archive store, credential, cache and file-transfer plugin), their records
# marked with the folder they go to. A model catalogue's prepare() takes LAB/NAME or
# LAB/NAME@VERSION, and each record's "folder" is MODELS_FOLDER.
MODELS_FOLDER = "models"
MAX_MODELS_PER_JOB = 4
MODEL_CATALOGUES = InputCatalogues(
    "models", limit=MAX_MODELS_PER_JOB, none_offered="This portal offers no published models."
)


def model_catalogue_register(catalogue: DataCatalogue) -> None:
    MODEL_CATALOGUES.register(catalogue)


def model_choices(user) -> list[DataChoice]:
    return MODEL_CATALOGUES.choices(user)


def model_prepare(*, user, references: list[str]) -> list[dict]:
    return MODEL_CATALOGUES.prepare(user=user, references=references)


def data_install(
    directory: Path, datasets: list[dict] | None, *, link_from: Path | None = None
) -> bool:
    """The launcher's list of datasets and the job's own credential, in its helper folder;
    whether there were any. `link_from`, another run's folder of the same sweep, shares its
    list (a hard link)."""
    helper = directory / HELPER_DIR
    shared = link_from / HELPER_DIR / DATASETS_MANIFEST if link_from is not None else None
    if shared is not None and shared.is_file():
        (helper / DATASETS_MANIFEST).hardlink_to(shared)
    elif datasets:
        (helper / DATASETS_MANIFEST).write_text(json.dumps({"datasets": datasets}, indent=1))
    else:
        return False
    credential = helper / CREDENTIAL_FILE
    descriptor = os.open(credential, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as stream:
        stream.write(data_credential(directory.name))
    for path in (helper / DATASETS_MANIFEST, credential):
        if settings.JOB_DIR_UID is not None:
            os.chown(path, settings.JOB_DIR_UID, -1)
    return True


def data_transfer_urls(datasets: list[dict] | None) -> list[str]:
    """The nightshift:// URLs through which HTCondor's file transfer brings the datasets the
    portal stores (spool mode), one per version: nightshift://PORTAL/SHA256. They name no
    secret: the plugin fetches with the job's credential, from the job's own folder."""
    urls = []
    for dataset in datasets or []:
        if dataset["kind"] == "archive":
            portal = urlsplit(dataset["url"]).netloc
            urls.append(f"{DATA_TRANSFER_SCHEME}://{portal}/{dataset['sha256']}")
    return list(dict.fromkeys(urls))  # two datasets with the same content: one transfer


def data_credential(job_id: str) -> str:
    """A bearer credential for one job's dataset downloads."""
    return signing.TimestampSigner(salt=_CREDENTIAL_SALT).sign(str(job_id))


def job_for_data_credential(credential: str) -> Job | None:
    """The job a credential belongs to while it may fetch: not ended, credential not expired."""
    try:
        job_id = signing.TimestampSigner(salt=_CREDENTIAL_SALT).unsign(
            credential, max_age=settings.DATASET_CREDENTIAL_MAX_AGE_S
        )
    except signing.BadSignature:
        return None
    return Job.objects.filter(public_id=job_id).exclude(state__in=FINAL_STATES).first()


def job_datasets(job: Job) -> list[dict]:
    return list(job.source.get("datasets") or [])


def job_models(job: Job) -> list[dict]:
    return list(job.source.get("models") or [])


def job_inputs(job: Job) -> list[dict]:
    """Everything the job's launcher fetches: its datasets, then its models."""
    return job_datasets(job) + job_models(job)


def jobs_using_versions(version_ids, *, active_only: bool = False) -> QuerySet[Job]:
    """Jobs given any of these dataset versions; `active_only`: those not ended."""
    condition = Q(pk__in=[])
    for version_id in version_ids:
        condition |= Q(source__datasets__contains=[{"version_id": version_id}])
    jobs = Job.objects.filter(condition)
    if active_only:
        jobs = jobs.exclude(state__in=FINAL_STATES)
    return jobs
