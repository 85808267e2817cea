from __future__ import annotations

from rest_framework import serializers

from ..models import Environment, EnvironmentVersion


class EnvironmentVersionSerializer(serializers.ModelSerializer):
    reference = serializers.CharField(help_text="NAME@VERSION, as jobs name it.")
    packages = serializers.SerializerMethodField(
        help_text="The locked packages, each {name, version}."
    )

    class Meta:
        model = EnvironmentVersion
        fields = [
            "number",
            "reference",
            "python_version",
            "python",
            "container_image",
            "requirements",
            "lock",
            "lock_sha256",
            "packages",
            "created_at",
        ]
        extra_kwargs = {
            "number": {"help_text": "Counts up from 1; a version never changes."},
            "python_version": {"help_text": "The Python it is locked for, e.g. 3.13."},
            "python": {"help_text": "The Python that runs scripts; empty for the site's."},
            "container_image": {"help_text": "For a container environment: its image."},
            "requirements": {"help_text": "The packages as asked for."},
            "lock": {"help_text": "Exact versions with their hashes (uv pip compile)."},
            "lock_sha256": {"help_text": "SHA-256 of the lock; the workstations' cache key."},
            "created_at": {"help_text": "When it was locked."},
        }

    def get_packages(self, version: EnvironmentVersion) -> list[dict[str, str]]:
        from ..locking import pinned_packages

        return [{"name": n, "version": v} for n, v in pinned_packages(version.lock)]


# The fields an environment shows in a list and on its own (a comment, not a docstring:
# drf-spectacular would copy a docstring into each schema component).
class EnvironmentBaseSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(
        source="owner.username",
        allow_null=True,
        default=None,
        help_text="Who keeps it; null for a site environment.",
    )
    lab = serializers.CharField(
        source="lab.name", allow_null=True, default=None, help_text="For lab visibility: the lab."
    )

    class Meta:
        model = Environment
        fields = ["name", "owner", "visibility", "lab", "kind", "description", "is_default"]
        extra_kwargs = {
            "name": {"help_text": "Its name; jobs use NAME or NAME@VERSION."},
            "visibility": {"help_text": "Who may use it: private, lab or site."},
            "kind": {"help_text": "packages (a lock) or container (an image)."},
            "description": {"help_text": "What it is for."},
            "is_default": {"help_text": "Used by jobs that name no environment."},
            "created_at": {"help_text": "When it was made."},
        }


class EnvironmentSerializer(EnvironmentBaseSerializer):
    versions = EnvironmentVersionSerializer(many=True, help_text="Newest first.")

    class Meta(EnvironmentBaseSerializer.Meta):
        fields = [*EnvironmentBaseSerializer.Meta.fields, "created_at", "versions"]


class EnvironmentSummarySerializer(EnvironmentBaseSerializer):
    latest = serializers.SerializerMethodField(help_text="NAME@VERSION of the newest version.")

    class Meta(EnvironmentBaseSerializer.Meta):
        fields = [*EnvironmentBaseSerializer.Meta.fields, "latest"]

    def get_latest(self, environment: Environment) -> str | None:
        versions = sorted(environment.versions.all(), key=lambda v: -v.number)
        return f"{environment.name}@{versions[0].number}" if versions else None


class VersionInputSerializer(serializers.Serializer):
    requirements = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=65536,
        trim_whitespace=False,
        help_text="Packages, one per line, as in a requirements.txt; resolved now into a lock.",
    )
    python_version = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=5,
        help_text="e.g. 3.13; empty for the site's (the workstations' Python).",
    )
    container_image = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=500,
        help_text="Instead of packages: a docker:// image or an Apptainer .sif path or URL.",
    )
    python = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="For a container: the Python inside the image; empty for the site's.",
    )


class EnvironmentCreateSerializer(VersionInputSerializer):
    name = serializers.CharField(
        max_length=80, help_text="Letters, digits, spaces and . _ - + ( ) [ ]; no '@'."
    )
    description = serializers.CharField(
        required=False, allow_blank=True, max_length=500, help_text="What it is for."
    )
    visibility = serializers.ChoiceField(
        choices=Environment.Visibility.choices,
        default=Environment.Visibility.PRIVATE,
        help_text="private (you), lab (a lab of yours) or site (administrators only).",
    )
    lab = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="For lab visibility: the name of your lab to share it with.",
    )


class BuildReportSerializer(serializers.Serializer):
    state = serializers.ChoiceField(
        choices=["queued", "running", "passed", "failed"], help_text="Where the test build is."
    )
    job = serializers.UUIDField(
        source="job_public_id", help_text="The job that builds it: its page shows the log live."
    )
    explanation = serializers.CharField(help_text="Why it failed, in plain words; else empty.")
    log_tail = serializers.CharField(help_text="The end of its install log and output.")
