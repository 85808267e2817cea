from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from rest_framework_tus.models import AbstractUpload

from labs.models import Visibility

# A dataset's name is a folder in every job that uses it (datasets/<name>/) and is typed in
# CLIs and URLs (NAME@VERSION): letters, digits and . _ - only.
DATASET_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$"
DATASET_NAME_HELP = "Use letters, digits and . _ -, starting with a letter or digit."


class Dataset(models.Model):
    """Data people share: immutable versions under one name, each identified by its content."""

    Visibility = Visibility

    name = models.CharField(
        max_length=80, validators=[RegexValidator(DATASET_NAME_PATTERN, DATASET_NAME_HELP)]
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="datasets"
    )
    lab = models.ForeignKey(
        "labs.Lab",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="datasets",
        help_text="For lab visibility: the lab that may use it.",
    )
    visibility = models.CharField(
        max_length=10, choices=Visibility.choices, default=Visibility.PRIVATE
    )
    description = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "owner_id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="dataset_name_unique_per_owner"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def latest_version(self) -> DatasetVersion | None:
        return self.versions.order_by("-number").first()


class DatasetVersion(models.Model):
    """One immutable version. Its SHA-256 is that of the canonical archive of its files
    (sorted, with fixed owners, modes and times), so the same files always hash the same."""

    class Source(models.TextChoices):
        UPLOAD = "upload", "Uploaded"
        PATH = "path", "A shared file system path"
        URL = "url", "Fetched from a URL"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64, db_index=True)
    size_bytes = models.BigIntegerField(help_text="The files' bytes, added up.")
    file_count = models.PositiveIntegerField()
    source = models.CharField(max_length=10, choices=Source.choices)
    # The uploaded file's name, the shared path or the URL: where the content came from.
    origin = models.CharField(max_length=2000, blank=True)
    # For a shared-file-system version: the folder jobs link to (nothing is stored here).
    shared_path = models.CharField(max_length=1000, blank=True)
    # The file list (capped), a few rows of tables and the thumbnails' file names.
    preview = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["dataset", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "number"], name="dataset_version_number"),
        ]

    def __str__(self) -> str:
        return self.reference

    @property
    def reference(self) -> str:
        return f"{self.dataset.name}@{self.number}"

    @property
    def is_shared_path(self) -> bool:
        return self.source == self.Source.PATH


class DatasetImport(models.Model):
    """Work that makes a version: an upload being checked, a shared path being read, a URL
    being fetched. The version (and a new dataset) appears only once it has succeeded."""

    class State(models.TextChoices):
        WAITING = "waiting", "Waiting"
        RUNNING = "running", "Reading and checksumming"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="dataset_imports"
    )
    # What the dataset will be, for a new one; an existing dataset of the owner's gets a version.
    name = models.CharField(
        max_length=80, validators=[RegexValidator(DATASET_NAME_PATTERN, DATASET_NAME_HELP)]
    )
    visibility = models.CharField(
        max_length=10, choices=Dataset.Visibility.choices, default=Dataset.Visibility.PRIVATE
    )
    lab = models.ForeignKey(
        "labs.Lab", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    description = models.CharField(max_length=500, blank=True)
    source = models.CharField(max_length=10, choices=DatasetVersion.Source.choices)
    origin = models.CharField(max_length=2000)
    # For a URL: the SHA-256 the fetched file must have, when the user gave one.
    expected_sha256 = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.WAITING)
    message = models.TextField(blank=True)
    bytes_done = models.BigIntegerField(default=0)
    # Moves on with the work; an import running with a heartbeat long gone lost its worker.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    bytes_total = models.BigIntegerField(null=True, blank=True)
    version = models.ForeignKey(
        DatasetVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"import of {self.name} ({self.state})"

    @property
    def is_finished(self) -> bool:
        return self.state in (self.State.DONE, self.State.FAILED)

    @property
    def percent(self) -> int | None:
        if not self.bytes_total:
            return None
        return min(100, round(100 * self.bytes_done / self.bytes_total))


class DatasetDelivery(models.Model):
    """The portal sent a version's archive to a job on a workstation: what moved, and where.

    Jobs fetch a version once per workstation (later jobs there reuse its copy), so these
    rows are the bytes datasets cost the network, and which jobs read which data."""

    version = models.ForeignKey(
        DatasetVersion, null=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    sha256 = models.CharField(max_length=64)
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="+")
    # As the launcher names its workstation (the machine ad's Name), and the address it
    # came from.
    workstation = models.CharField(max_length=200, blank=True)
    remote_address = models.GenericIPAddressField(null=True, blank=True)
    size_bytes = models.BigIntegerField()
    delivered_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-delivered_at"]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} to {self.workstation or self.remote_address}"


class DatasetUpload(AbstractUpload):
    """A resumable (tus) upload of a dataset's file, its owner's alone; once every byte has
    arrived it becomes an import. Its bytes wait in DATASETS_DIR/uploads/ until then."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="dataset_uploads"
    )
    dataset_import = models.ForeignKey(
        DatasetImport, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"upload {self.guid} ({self.upload_offset} of {self.upload_length} bytes)"
