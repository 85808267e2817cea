from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

from labs.models import Visibility

# Names are typed in CLIs and URLs (NAME@VERSION): keep them plain.
ENVIRONMENT_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 ._+()\[\]-]{0,79}$"
PYTHON_VERSION_PATTERN = r"^3\.\d{1,2}$"


class Environment(models.Model):
    """A software environment people share: immutable versions under one name."""

    Visibility = Visibility

    class Kind(models.TextChoices):
        PACKAGES = "packages", "Python packages (a requirements list, locked)"
        CONTAINER = "container", "A container image"

    name = models.CharField(
        max_length=80,
        validators=[
            RegexValidator(
                ENVIRONMENT_NAME_PATTERN,
                "Use letters, digits, spaces and . _ - + ( ) [ ], starting with a letter or digit.",
            )
        ],
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="environments",
        help_text="Empty for a site environment admins keep.",
    )
    lab = models.ForeignKey(
        "labs.Lab",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="environments",
        help_text="For lab visibility: the lab that may use it.",
    )
    visibility = models.CharField(
        max_length=10, choices=Visibility.choices, default=Visibility.PRIVATE
    )
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.PACKAGES)
    description = models.CharField(max_length=500, blank=True)
    # Made by the portal for a job's own requirements.txt: listed only to its owner's jobs.
    is_automatic = models.BooleanField(default=False)
    # Preselected on the job form (site environments).
    is_default = models.BooleanField(default=False)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-is_default", "name"]
        constraints = [
            # A user's names, and the site's, are each unique.
            models.UniqueConstraint(
                fields=["owner", "name"],
                name="environment_name_unique_per_owner",
                condition=Q(owner__isnull=False),
            ),
            models.UniqueConstraint(
                fields=["name"],
                name="site_environment_name_unique",
                condition=Q(owner__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def latest_version(self) -> EnvironmentVersion | None:
        return self.versions.order_by("-number").first()


class EnvironmentVersion(models.Model):
    """One immutable version: a specification, its Python, and the lock it resolved to (or a
    container image). Jobs name it as NAME@NUMBER."""

    environment = models.ForeignKey(Environment, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    requirements = models.TextField(blank=True, help_text="As given: one package per line.")
    python_version = models.CharField(
        max_length=5,
        blank=True,
        validators=[RegexValidator(PYTHON_VERSION_PATTERN, "Write a version such as 3.13.")],
    )
    # The Python that runs scripts on the workstation (inside the image for a container).
    python = models.CharField(max_length=200, blank=True)
    container_image = models.CharField(max_length=500, blank=True)
    lock = models.TextField(blank=True, help_text="Exact versions with their hashes.")
    lock_sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["environment", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["environment", "number"], name="one_number_each"),
        ]

    def __str__(self) -> str:
        return self.reference

    @property
    def reference(self) -> str:
        return f"{self.environment.name}@{self.number}"

    @property
    def package_count(self) -> int:
        from .locking import pinned_packages

        return len(pinned_packages(self.lock))


class EnvironmentBuild(models.Model):
    """A test build of a version: a small HTCondor job that installs it and imports nothing
    of the student's, so that a broken environment shows before a real job fails."""

    version = models.ForeignKey(EnvironmentVersion, on_delete=models.CASCADE, related_name="builds")
    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="+")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"test build of {self.version}"
