"""Which datasets a user may see and use."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from labs.models import Membership

from .models import Dataset, DatasetImport


def dataset_list_visible_to(user) -> QuerySet[Dataset]:
    """Their own, their labs' and the site's datasets (staff: all)."""
    datasets = Dataset.objects.select_related("owner", "lab")
    if user.is_staff:
        return datasets
    labs = Membership.objects.filter(user=user).values("lab_id")
    return datasets.filter(
        Q(owner=user)
        | Q(visibility=Dataset.Visibility.SITE)
        | Q(visibility=Dataset.Visibility.LAB, lab__in=labs)
    )


def dataset_get_visible(user, name: str) -> Dataset | None:
    """By name: the user's own first, then their labs', then the site's."""
    matches = list(dataset_list_visible_to(user).filter(name=name))
    order = {Dataset.Visibility.PRIVATE: 0, Dataset.Visibility.LAB: 1}

    def rank(dataset: Dataset) -> tuple[int, int]:
        return (0 if dataset.owner_id == user.pk else 1, order.get(dataset.visibility, 2))

    return min(matches, key=rank) if matches else None


def dataset_may_change(user, dataset: Dataset) -> bool:
    """Add versions, delete: the owner, and staff."""
    return user.is_staff or dataset.owner_id == user.pk


def dataset_imports_unfinished(user) -> QuerySet[DatasetImport]:
    return DatasetImport.objects.filter(owner=user).exclude(
        state__in=(DatasetImport.State.DONE, DatasetImport.State.FAILED)
    )
