"""Storage quotas for datasets: what a user's own datasets, and a lab's shared ones, keep on
the portal's disk, against the limits an administrator set.

A user's limit is the site's NIGHTSHIFT_DATASET_QUOTA_GB; a lab's is its "Dataset storage"
in the admin, counting the datasets shared with that lab. Versions registered from a shared
file system keep nothing on the portal and count for nothing. Content kept once for several
versions counts once. Published models are kept in the same store and count too
(storage_kept_register): for their publisher, and for their lab when shared with it. A
resumable upload still in progress counts for its owner at its declared length, from its
creation: uploads started side by side cannot together pass the limit each passed alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Sum

from labs.models import Lab
from plumbing.panels import Panel

from .models import Dataset, DatasetUpload, DatasetVersion

GB = 10**9


class StorageQuotaExceeded(ValueError):
    """What would be stored does not fit; the message says whose limit and by how much."""


@dataclass(frozen=True)
class StorageUse:
    """Bytes kept against a limit (None: no limit)."""

    used_bytes: int
    limit_bytes: int | None

    @property
    def percent(self) -> int | None:
        if not self.limit_bytes:
            return None
        return min(100, round(100 * self.used_bytes / self.limit_bytes))

    @property
    def free_bytes(self) -> int | None:
        return None if self.limit_bytes is None else max(0, self.limit_bytes - self.used_bytes)


def _kept(versions) -> int:
    distinct = versions.exclude(source=DatasetVersion.Source.PATH).values("sha256").distinct()
    sizes = DatasetVersion.objects.filter(
        pk__in=[
            versions.filter(sha256=row["sha256"]).values_list("pk", flat=True).first()
            for row in distinct
        ]
    )
    return sizes.aggregate(total=Sum("size_bytes"))["total"] or 0


def _limit(gigabytes: float | None) -> int | None:
    return None if gigabytes is None else int(gigabytes * GB)


# Other apps that keep files in the same store (a published model's) count them against the
# same limits: each hands in the bytes a user, and a lab, keeps there.
_also_kept_by_user: list[Callable[[object], int]] = []
_also_kept_by_lab: list[Callable[[Lab], int]] = []


def storage_kept_register(
    *, by_user: Callable[[object], int], by_lab: Callable[[Lab], int]
) -> None:
    if by_user not in _also_kept_by_user:
        _also_kept_by_user.append(by_user)
        _also_kept_by_lab.append(by_lab)


def _uploading(user) -> int:
    unfinished = DatasetUpload.objects.filter(
        owner=user, dataset_import__isnull=True, upload_length__gt=0
    )
    return unfinished.aggregate(total=Sum("upload_length"))["total"] or 0


def storage_use_of_user(user) -> StorageUse:
    kept = _kept(DatasetVersion.objects.filter(dataset__owner=user))
    kept += sum(count(user) for count in _also_kept_by_user) + _uploading(user)
    return StorageUse(kept, _limit(settings.DATASET_QUOTA_GB))


def storage_use_of_lab(lab) -> StorageUse:
    versions = DatasetVersion.objects.filter(
        dataset__lab=lab, dataset__visibility=Dataset.Visibility.LAB
    )
    kept = _kept(versions) + sum(count(lab) for count in _also_kept_by_lab)
    return StorageUse(kept, _limit(lab.dataset_storage_gb))


def _size(count: int) -> str:
    return f"{count / GB:,.2f} GB" if count >= GB / 100 else f"{count / 10**6:,.1f} MB"


def storage_quota_check(*, user, lab, adding_bytes: int) -> None:
    """Raises StorageQuotaExceeded if `adding_bytes` more would pass the user's limit or, for a
    dataset shared with `lab`, the lab's."""
    checks = [("Your datasets and models", storage_use_of_user(user))]
    if lab is not None:
        checks.append(
            (f"The datasets and models shared with “{lab.name}”", storage_use_of_lab(lab))
        )
    for whose, use in checks:
        if use.limit_bytes is not None and use.used_bytes + adding_bytes > use.limit_bytes:
            raise StorageQuotaExceeded(
                f"{whose} may keep {_size(use.limit_bytes)} on the portal and keep "
                f"{_size(use.used_bytes)}; this one needs {_size(adding_bytes)} more. Delete a "
                "dataset you no longer need, or ask an administrator for more room."
            )


def limit_text(use: StorageUse) -> str:
    return "" if use.limit_bytes is None else f"{use.limit_bytes / GB:,.2f} GB"


def account_storage_panel(*, user) -> Panel:
    """The account page's section: the user's own datasets, and each of their labs' shared."""
    rows = [{"label": "Your datasets", "use": storage_use_of_user(user)}]
    for lab in Lab.objects.filter(memberships__user=user).order_by("name"):
        rows.append({"label": f"Shared with {lab.name}", "use": storage_use_of_lab(lab)})
    for row in rows:
        row["limit_text"] = limit_text(row["use"])
    return Panel("datasets/_storage.html", {"rows": rows})


def lab_storage_panel(*, lab) -> Panel:
    use = storage_use_of_lab(lab)
    return Panel(
        "datasets/_storage.html",
        {
            "rows": [
                {"label": "Datasets shared with the lab", "use": use, "limit_text": limit_text(use)}
            ]
        },
    )
