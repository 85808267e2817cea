"""Published models in jobs: what the job form offers, and the records a job's launcher gets
for the models it names. They travel as datasets do: the same archive store, the delivery
endpoint checked against the job's own credential, and the workstations' cache."""

from __future__ import annotations

from datasets.services import archive_path, delivery_url, size_text
from jobs.services import MODELS_FOLDER, DataChoice, JobSubmissionError

from .models import ModelVersion
from .selectors import REFERENCE, model_list_visible_to, model_version_get_visible


def archive_name(version: ModelVersion) -> str:
    """A version's download, as a browser saves it: NAME-VERSION.tar."""
    return f"{version.model.name}-{version.number}.tar"


def version_record(version: ModelVersion) -> dict:
    """What a job keeps of a model version (Job.source["models"]) and its launcher reads."""
    return {
        "name": version.model.name,
        "reference": version.reference,
        "model_version_id": version.pk,
        "sha256": version.sha256,
        "size_bytes": version.size_bytes,
        "file_count": version.file_count,
        "kind": "archive",
        "url": delivery_url(version.sha256),
        "folder": MODELS_FOLDER,
    }


class ModelCatalogue:
    """The model registry's side of jobs.inputs."""

    def choices(self, user) -> list[DataChoice]:
        return [
            DataChoice(
                reference=listing.latest.reference,
                label=f"{listing.latest.reference} ({size_text(listing.latest.size_bytes)}, "
                f"{listing.latest.file_count:,} files)",
            )
            for listing in model_list_visible_to(user)
        ]

    def prepare(self, *, user, references: list[str]) -> list[dict]:
        records: dict[str, dict] = {}
        for raw in references:
            text = str(raw).strip()
            if REFERENCE.fullmatch(text) is None:
                raise JobSubmissionError(
                    "models",
                    f"{text[:100]!r} is not a model: give LAB/NAME or "
                    "LAB/NAME@VERSION, as the models page shows it.",
                )
            version = model_version_get_visible(user, text)
            if version is None:
                raise JobSubmissionError(
                    "models",
                    f"There is no model {text} that you may use; the models page "
                    "lists yours, your labs' and the site's.",
                )
            if version.model.name in records:
                raise JobSubmissionError(
                    "models",
                    f"Two models are called {version.model.name}: each would be "
                    f"models/{version.model.name}/ in the job. Give one.",
                )
            if not archive_path(version.sha256).is_file():
                raise JobSubmissionError("models", f"{version.reference} is no longer stored.")
            records[version.model.name] = version_record(version)
        return list(records.values())


CATALOGUE = ModelCatalogue()


def archives_held(hashes: set[str]) -> set[str]:
    """Which of `hashes` a model version keeps (datasets.storage asks before deleting)."""
    return set(ModelVersion.objects.filter(sha256__in=hashes).values_list("sha256", flat=True))


def _distinct_bytes(versions) -> int:
    return sum(dict(versions.values_list("sha256", "size_bytes")).values())


def storage_kept_by_user(user) -> int:
    """What the user's published versions keep in the store, each content once."""
    return _distinct_bytes(ModelVersion.objects.filter(published_by=user))


def storage_kept_by_lab(lab) -> int:
    """What versions shared with the lab keep in the store, each content once."""
    return _distinct_bytes(ModelVersion.objects.filter(model__lab=lab, visibility="lab"))
