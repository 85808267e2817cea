"""Datasets: imported (an upload, a shared path), checked, packed once, versioned, deleted."""

from __future__ import annotations

import logging
import os
import re
import shutil
from datetime import timedelta
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from audit.services import audit_record
from jobs.services import (
    ArchiveError,
    ArchiveLimits,
    extract_archive,
    is_archive,
    jobs_using_versions,
)
from labs.selectors import lab_by_name
from plumbing.tasks import enqueue

from . import content, fetching, storage
from .content import NAME_PART as NAME_PART
from .content import DatasetContentError as DatasetContentError
from .content import DatasetFile as DatasetFile
from .content import Digest as Digest
from .content import pack as pack
from .delivery import delivery_url as delivery_url
from .delivery import size_text as size_text
from .models import Dataset, DatasetImport, DatasetUpload, DatasetVersion
from .quotas import StorageQuotaExceeded, storage_quota_check
from .quotas import storage_kept_register as storage_kept_register
from .storage import archive_download as archive_download
from .storage import archive_holder_register as archive_holder_register
from .storage import archive_path as archive_path
from .storage import archive_store as archive_store
from .storage import partial_archive_path as partial_archive_path

logger = logging.getLogger(__name__)

PROGRESS_EVERY_BYTES = 64 * 2**20
# An import still waiting after this lost its task; one whose heartbeat is this old, its worker.
LOST_AFTER = timedelta(minutes=10)
STALLED_AFTER = timedelta(minutes=30)
MOST_ATTEMPTS = 3
LEFTOVER_AFTER = timedelta(days=1)


class DatasetError(ValueError):
    """A request about datasets that cannot be done; `field` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def limits() -> content.Limits:
    return content.Limits(
        max_files=settings.DATASET_MAX_FILES, max_bytes=int(settings.DATASET_MAX_GB * 2**30)
    )


def _checked_import(
    *, user, name: str, visibility: str, lab, description: str, source: str, origin: str
) -> DatasetImport:
    existing = Dataset.objects.filter(owner=user, name=name).first()
    if existing is None:
        if visibility == Dataset.Visibility.SITE and not user.is_staff:
            raise DatasetError("visibility", "Only administrators share datasets with everyone.")
        if visibility == Dataset.Visibility.LAB and (
            lab is None or not lab.members.filter(pk=user.pk).exists()
        ):
            raise DatasetError("lab", "Choose one of your labs to share it with.")
    imported = DatasetImport(
        owner=user,
        name=name,
        visibility=visibility,
        description=description[:500],
        lab=lab if visibility == Dataset.Visibility.LAB else None,
        source=source,
        origin=origin,
    )
    try:
        imported.full_clean(exclude=["owner", "lab", "version"])
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise DatasetError(field, " ".join(messages)) from None
    return imported


def upload_name(raw: str) -> str:
    """The uploaded file's own name, without any folder a browser or a client sent."""
    name = PurePosixPath(raw.replace("\\", "/")).name
    if not content.NAME_PART.fullmatch(name) or name in (".", ".."):
        raise DatasetError("file", "That file's name cannot be used; rename it.")
    return name


def lab_named(name: str):
    """The lab a client names for lab visibility, or None for none."""
    if not name:
        return None
    lab = lab_by_name(name)
    if lab is None:
        raise DatasetError("lab", f"No lab is called {name[:100]!r}.")
    return lab


def dataset_upload_check(
    *,
    user,
    name: str,
    filename: str,
    size: int,
    visibility: str = Dataset.Visibility.PRIVATE,
    lab=None,
    description: str = "",
) -> None:
    """Refuses (DatasetError) an upload before its bytes are sent: its name, its file's name,
    its size, and the storage quota it would need."""
    upload_name(filename)
    _checked_import(
        user=user,
        name=name,
        visibility=visibility,
        lab=lab,
        description=description,
        source=DatasetVersion.Source.UPLOAD,
        origin=filename,
    )
    if size > limits().max_bytes:
        raise DatasetError(
            "file",
            f"The file is larger than {settings.DATASET_MAX_GB:g} GB, the limit for a dataset.",
        )
    try:
        storage_quota_check(
            user=user, lab=lab if visibility == Dataset.Visibility.LAB else None, adding_bytes=size
        )
    except StorageQuotaExceeded as exc:
        raise DatasetError("quota", str(exc)) from None


def dataset_import_from_file(
    *,
    user,
    name: str,
    filename: str,
    path: str,
    visibility: str = Dataset.Visibility.PRIVATE,
    lab=None,
    description: str = "",
) -> DatasetImport:
    """A file that arrived whole (a resumable upload) becomes an import; the file is moved."""
    filename = upload_name(filename)
    imported = _checked_import(
        user=user,
        name=name,
        visibility=visibility,
        lab=lab,
        description=description,
        source=DatasetVersion.Source.UPLOAD,
        origin=filename,
    )
    folder = storage.incoming_dir(imported.public_id) / "upload"
    folder.mkdir(parents=True)
    os.replace(path, folder / filename)
    return _queue(imported, bytes_total=(folder / filename).stat().st_size)


def dataset_import_from_upload(
    *,
    user,
    name: str,
    upload: UploadedFile,
    visibility: str = Dataset.Visibility.PRIVATE,
    lab=None,
    description: str = "",
) -> DatasetImport:
    """Keeps the upload aside and queues its check: a version appears once it has passed."""
    filename = upload_name(upload.name or "")
    imported = _checked_import(
        user=user,
        name=name,
        visibility=visibility,
        lab=lab,
        description=description,
        source=DatasetVersion.Source.UPLOAD,
        origin=filename,
    )
    if upload.size > limits().max_bytes:
        raise DatasetError(
            "file",
            f"The file is larger than {settings.DATASET_MAX_GB:g} GB, the limit for a dataset.",
        )
    try:
        storage_quota_check(
            user=user,
            lab=lab if visibility == Dataset.Visibility.LAB else None,
            adding_bytes=upload.size,
        )
    except StorageQuotaExceeded as exc:
        raise DatasetError("quota", str(exc)) from None
    folder = storage.incoming_dir(imported.public_id) / "upload"
    folder.mkdir(parents=True)
    try:
        with open(folder / filename, "xb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        return _queue(imported, bytes_total=upload.size)
    except BaseException:
        shutil.rmtree(folder.parent, ignore_errors=True)
        raise


def _inside_allowed_roots(raw: str) -> Path:
    if not settings.DATASET_ROOTS:
        raise DatasetError("path", "This site has no shared file system for datasets.")
    if not raw.startswith("/") or "\x00" in raw:
        raise DatasetError("path", "Give an absolute path, such as /shared/data/imagenet.")
    try:
        resolved = Path(raw).resolve(strict=True)
    except (OSError, RuntimeError):
        raise DatasetError("path", f"{raw} does not exist or cannot be read.") from None
    for root in settings.DATASET_ROOTS:
        root = root.resolve()
        if resolved == root or root in resolved.parents:
            return resolved
    allowed = ", ".join(str(root) for root in settings.DATASET_ROOTS)
    raise DatasetError(
        "path", f"{raw} is outside the shared folders datasets may come from ({allowed})."
    )


def dataset_import_from_path(
    *,
    user,
    name: str,
    path: str,
    visibility: str = Dataset.Visibility.PRIVATE,
    lab=None,
    description: str = "",
) -> DatasetImport:
    """Registers a folder on the shared file system: it is read and hashed once, never copied."""
    resolved = _inside_allowed_roots(path)
    if not resolved.is_dir():
        raise DatasetError("path", f"{path} is not a folder.")
    imported = _checked_import(
        user=user,
        name=name,
        visibility=visibility,
        lab=lab,
        description=description,
        source=DatasetVersion.Source.PATH,
        origin=str(resolved),
    )
    return _queue(imported)


def _queue(imported: DatasetImport, *, bytes_total: int | None = None) -> DatasetImport:
    imported.bytes_total = bytes_total
    with transaction.atomic():
        imported.save()
        audit_record(
            action="dataset.import.start",
            actor=imported.owner,
            target=imported,
            detail=f"{imported.source} {imported.origin}",
        )
        pk = imported.pk
        transaction.on_commit(lambda: dataset_enqueue_import(pk))
    return imported


def dataset_enqueue_import(import_pk: int) -> None:
    enqueue("datasets.tasks.import_dataset", import_pk)


def dataset_import_from_url(
    *,
    user,
    name: str,
    url: str,
    sha256: str = "",
    visibility: str = Dataset.Visibility.PRIVATE,
    lab=None,
    description: str = "",
) -> DatasetImport:
    """Queues a download by the portal: the address is checked when it is fetched, and the
    file, when `sha256` is given, must have that SHA-256."""
    try:
        url = fetching.checked_url(url)
    except fetching.FetchError as exc:
        raise DatasetError("url", str(exc)) from None
    sha256 = sha256.strip().lower()
    if sha256 and not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise DatasetError("sha256", "A SHA-256 is 64 hexadecimal digits.")
    imported = _checked_import(
        user=user,
        name=name,
        visibility=visibility,
        lab=lab,
        description=description,
        source=DatasetVersion.Source.URL,
        origin=url,
    )
    imported.expected_sha256 = sha256
    return _queue(imported)


class _Progress:
    """Records how far an import has got (and that its worker is alive), every 64 MB."""

    def __init__(self, imported: DatasetImport, total: int | None = None) -> None:
        self.pk, self.total, self.last = imported.pk, total, -PROGRESS_EVERY_BYTES

    def __call__(self, done: int, total: int | None = None) -> None:
        total = total if total is not None else self.total
        if done - self.last >= PROGRESS_EVERY_BYTES or done == total:
            self.last = done
            DatasetImport.objects.filter(pk=self.pk).update(
                bytes_done=done, bytes_total=total, heartbeat_at=timezone.now()
            )


def _fetched(imported: DatasetImport, work: Path) -> Path:
    for leftover in (work / "download", work / "upload"):  # from an interrupted attempt
        shutil.rmtree(leftover, ignore_errors=True)
    try:
        fetched = fetching.fetch(
            imported.origin,
            work / "download",
            max_bytes=limits().max_bytes,
            progress=_Progress(imported),
        )
    except fetching.FetchError as exc:
        raise content.DatasetContentError(str(exc)) from None
    if imported.expected_sha256 and fetched.sha256 != imported.expected_sha256:
        raise content.DatasetContentError(
            f"Checksum mismatch: the file's SHA-256 is {fetched.sha256}, not the "
            f"{imported.expected_sha256} given. Nothing was kept."
        )
    named = work / "upload" / _safe_download_name(fetched.path.name)
    named.parent.mkdir()
    os.replace(fetched.path, named)
    return named


def _safe_download_name(name: str) -> str:
    try:
        return upload_name(name)
    except DatasetError:
        return "download"


def _materialise(imported: DatasetImport, work: Path) -> Path:
    """The folder whose files become the version."""
    if imported.source == DatasetVersion.Source.PATH:
        return _inside_allowed_roots(imported.origin)
    if imported.source == DatasetVersion.Source.URL:
        upload = _fetched(imported, work)
    else:
        upload = work / "upload" / imported.origin
    tree = work / "tree"
    shutil.rmtree(tree, ignore_errors=True)  # an interrupted attempt's
    tree.mkdir()
    # The upload stays where it is until the import ends, so that a retry finds it.
    if is_archive(upload.name):
        checked = limits()
        try:
            extract_archive(upload, tree, ArchiveLimits(checked.max_files, checked.max_bytes))
        except ArchiveError as exc:
            raise content.DatasetContentError(str(exc)) from None
    else:
        os.link(upload, tree / upload.name)
    return tree


def dataset_import_run(import_pk: int) -> DatasetImport:
    """Checks, packs and hashes an import's files, then makes the version (or finds that the
    dataset's latest version already has exactly this content)."""
    with transaction.atomic():
        imported = DatasetImport.objects.select_for_update().get(pk=import_pk)
        if imported.state != DatasetImport.State.WAITING:
            return imported
        imported.state = DatasetImport.State.RUNNING
        imported.heartbeat_at = timezone.now()
        imported.attempts += 1
        imported.save(update_fields=["state", "heartbeat_at", "attempts"])
    work = storage.incoming_dir(imported.public_id)
    work.mkdir(parents=True, exist_ok=True)
    partial = storage.partial_archive_path()
    try:
        tree = _materialise(imported, work)
        files = content.dataset_files(tree, limits())
        total = sum(file.size for file in files)
        DatasetImport.objects.filter(pk=imported.pk).update(bytes_total=total, bytes_done=0)
        digest = _pack(imported, tree, files, partial, total)
        _check_room(imported, digest)
        summary = content.preview(tree, files, storage.thumbnails_dir(digest.sha256))
        _finish(imported, digest, summary)
    except (content.DatasetContentError, DatasetError) as exc:
        _fail(imported, str(exc))
    except OSError as exc:
        logger.exception("dataset import %s failed", imported.public_id)
        _fail(imported, f"The files could not be read or stored ({exc.strerror or exc}).")
    finally:
        partial.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    imported.refresh_from_db()
    return imported


def _check_room(imported: DatasetImport, digest: content.Digest) -> None:
    """The storage quota, once the size is known (a URL's, say); content the owner keeps
    already adds nothing. A refused archive no version holds is removed."""
    if imported.source == DatasetVersion.Source.PATH:
        return
    if DatasetVersion.objects.filter(dataset__owner=imported.owner, sha256=digest.sha256).exists():
        return
    lab = imported.lab if imported.visibility == Dataset.Visibility.LAB else None
    try:
        storage_quota_check(user=imported.owner, lab=lab, adding_bytes=digest.size_bytes)
    except StorageQuotaExceeded as exc:
        if not DatasetVersion.objects.filter(
            sha256=digest.sha256
        ).exists() and not storage.archives_held_elsewhere({digest.sha256}):
            storage.archive_path(digest.sha256).unlink(missing_ok=True)
        raise DatasetError("quota", str(exc)) from None


def _pack(imported: DatasetImport, tree: Path, files, partial: Path, total: int):
    progress = _Progress(imported, total)
    if imported.source == DatasetVersion.Source.PATH:
        return content.pack(tree, files, None, progress)
    return storage.archive_store(partial, lambda out: content.pack(tree, files, out, progress))


def _finish(imported: DatasetImport, digest: content.Digest, summary: dict) -> None:
    with transaction.atomic():
        dataset, created = Dataset.objects.select_for_update().get_or_create(
            owner=imported.owner,
            name=imported.name,
            defaults={
                "visibility": imported.visibility,
                "lab": imported.lab,
                "description": imported.description,
            },
        )
        latest = dataset.latest_version
        if latest is not None and latest.sha256 == digest.sha256:
            version, message = latest, f"The content is the same as version {latest.number}."
        else:
            number = (dataset.versions.aggregate(n=Max("number"))["n"] or 0) + 1
            version = DatasetVersion.objects.create(
                dataset=dataset,
                number=number,
                sha256=digest.sha256,
                size_bytes=digest.size_bytes,
                file_count=digest.file_count,
                source=imported.source,
                origin=imported.origin,
                shared_path=imported.origin
                if imported.source == DatasetVersion.Source.PATH
                else "",
                preview=summary,
                created_by=imported.owner,
            )
            message = f"Version {number}: {digest.file_count:,} files, sha256 {digest.sha256}."
            audit_record(
                action="dataset.version.create",
                actor=imported.owner,
                target=dataset,
                detail=f"{version.reference} sha256:{digest.sha256}",
            )
        DatasetImport.objects.filter(pk=imported.pk).update(
            state=DatasetImport.State.DONE,
            version=version,
            message=message,
            finished_at=timezone.now(),
        )


def _fail(imported: DatasetImport, message: str) -> None:
    DatasetImport.objects.filter(pk=imported.pk).update(
        state=DatasetImport.State.FAILED, message=message, finished_at=timezone.now()
    )
    audit_record(
        action="dataset.import.fail", actor=imported.owner, target=imported, detail=message[:500]
    )


def dataset_imports_recover(*, now=None) -> dict[str, int]:
    """Imports whose task was lost (the broker restarted) are queued again; those whose
    worker died mid-way start again, up to MOST_ATTEMPTS; folders left by either are removed."""
    now = now or timezone.now()
    report = {"queued": 0, "restarted": 0, "failed": 0, "removed": 0, "uploads_removed": 0}
    lost = DatasetImport.objects.filter(
        state=DatasetImport.State.WAITING, created_at__lt=now - LOST_AFTER
    )
    for pk in lost.values_list("pk", flat=True):
        dataset_enqueue_import(pk)
        report["queued"] += 1
    stalled = DatasetImport.objects.filter(
        state=DatasetImport.State.RUNNING, heartbeat_at__lt=now - STALLED_AFTER
    )
    for imported in stalled:
        if imported.attempts >= MOST_ATTEMPTS:
            _fail(imported, f"The import was interrupted {imported.attempts} times; try again.")
            shutil.rmtree(storage.incoming_dir(imported.public_id), ignore_errors=True)
            report["failed"] += 1
            continue
        DatasetImport.objects.filter(pk=imported.pk, state=DatasetImport.State.RUNNING).update(
            state=DatasetImport.State.WAITING
        )
        dataset_enqueue_import(imported.pk)
        report["restarted"] += 1
    report["removed"] = _remove_leftovers(now)
    report["uploads_removed"] = uploads_remove_expired(now=now)
    return report


def uploads_remove_expired(*, now=None) -> int:
    """Resumable uploads never finished whose expiry has passed, with the bytes they kept."""
    removed = 0
    expired = DatasetUpload.objects.filter(
        expires__lt=now or timezone.now(), dataset_import__isnull=True
    )
    for upload in expired:
        upload.delete()  # drf-tus removes its file too
        removed += 1
    return removed


def _remove_leftovers(now) -> int:
    """Folders of imports that have ended, or that no import owns, and partial archives."""
    removed = 0
    unfinished = {
        str(public_id)
        for public_id in DatasetImport.objects.exclude(
            state__in=(DatasetImport.State.DONE, DatasetImport.State.FAILED)
        ).values_list("public_id", flat=True)
    }
    old = (now - LEFTOVER_AFTER).timestamp()
    incoming = settings.DATASETS_DIR / "incoming"
    candidates = [
        *(incoming.iterdir() if incoming.is_dir() else ()),
        *(settings.DATASETS_DIR / "objects").glob(".partial-*"),
    ]
    for path in candidates:
        if path.name in unfinished or path.lstat().st_mtime > old:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed += 1
    return removed


def dataset_delete(*, user, dataset: Dataset) -> None:
    """The dataset and its versions; stored content no other version holds is removed.
    Refused (DatasetError) while a job that has not ended uses any of its versions."""
    in_use = jobs_using_versions(dataset.versions.values_list("pk", flat=True), active_only=True)
    count = in_use.count()
    if count:
        names = ", ".join(f"“{job.name}”" for job in in_use.order_by("created_at")[:3])
        raise DatasetError(
            "dataset",
            f"{dataset.name} is used by {count} job{'s' if count != 1 else ''} "
            f"that {'have' if count != 1 else 'has'} not ended ({names}); delete it once "
            f"{'they have' if count != 1 else 'it has'} ended, or cancel "
            f"{'them' if count != 1 else 'it'}.",
        )
    hashes = set(dataset.versions.values_list("sha256", flat=True))
    with transaction.atomic():
        audit_record(action="dataset.delete", actor=user, target=dataset, detail=dataset.name)
        dataset.delete()
        still_used = set(
            DatasetVersion.objects.filter(sha256__in=hashes).values_list("sha256", flat=True)
        )
    for sha256 in hashes - still_used - storage.archives_held_elsewhere(hashes - still_used):
        storage.archive_path(sha256).unlink(missing_ok=True)
        shutil.rmtree(storage.thumbnails_dir(sha256), ignore_errors=True)
