"""Which datasets a user may see and use."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, QuerySet, Sum

from jobs.models import Job
from jobs.selectors import job_list_visible_to
from jobs.services import jobs_using_versions
from labs.selectors import shared_with
from plumbing.names import pick_named, split_qualified

from .models import Dataset, DatasetDelivery, DatasetImport


def dataset_list_visible_to(user) -> QuerySet[Dataset]:
    """Their own, their labs' and the site's datasets (staff: all)."""
    datasets = Dataset.objects.select_related("owner", "lab")
    return shared_with(user, datasets, owner_field="owner", lab_field="lab")


def dataset_get_visible(user, reference: str) -> Dataset | None:
    """By NAME (the user's own, or the only one anyone else offers under that name) or by
    OWNER/NAME; plumbing.names.AmbiguousName where a bare name is offered by several
    owners, so that no lab member's dataset takes the place of the one another meant."""
    qualifier, name = split_qualified(reference)
    matches = list(dataset_list_visible_to(user).filter(name=name).order_by("pk"))
    return pick_named("dataset", matches, user_id=user.pk, qualifier=qualifier)


def dataset_may_change(user, dataset: Dataset) -> bool:
    """Add versions, delete: the owner, and staff."""
    return user.is_staff or dataset.owner_id == user.pk


def dataset_imports_unfinished(user) -> QuerySet[DatasetImport]:
    return DatasetImport.objects.filter(owner=user).exclude(
        state__in=(DatasetImport.State.DONE, DatasetImport.State.FAILED)
    )


@dataclass(frozen=True)
class DatasetUse:
    """One job that read a version of the dataset, as its page lists it."""

    job: Job
    reference: str


@dataclass(frozen=True)
class DatasetLineage:
    """Who read a dataset: the jobs the viewer may see (with their sweeps and studies), how
    many other jobs did, and what moving it to workstations cost."""

    uses: list[DatasetUse]
    other_jobs: int
    workstations: int
    bytes_moved: int

    @property
    def groups(self) -> list:
        """The sweeps and studies among the jobs listed, once each."""
        return list(
            {use.job.sweep_id: use.job.sweep for use in self.uses if use.job.sweep_id}.values()
        )


LINEAGE_JOBS = 50


def dataset_lineage(user, dataset: Dataset) -> DatasetLineage:
    version_ids = list(dataset.versions.values_list("pk", flat=True))
    using = jobs_using_versions(version_ids)
    visible = job_list_visible_to(user).filter(pk__in=using.values("pk"))
    jobs = list(visible.select_related("sweep").order_by("-created_at")[:LINEAGE_JOBS])
    references = {v: r for v, r in dataset.versions.values_list("pk", "number")}
    uses = []
    for job in jobs:
        numbers = [
            references[d["version_id"]]
            for d in job.source.get("datasets") or []
            if d.get("version_id") in references
        ]
        uses.append(DatasetUse(job, ", ".join(f"{dataset.name}@{n}" for n in numbers)))
    moved = DatasetDelivery.objects.filter(version__in=version_ids).aggregate(
        count=Count("workstation", distinct=True), total=Sum("size_bytes")
    )
    return DatasetLineage(
        uses=uses,
        other_jobs=using.count() - visible.count(),
        workstations=moved["count"] or 0,
        bytes_moved=moved["total"] or 0,
    )
