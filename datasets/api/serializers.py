from __future__ import annotations

from rest_framework import serializers

from ..models import DATASET_NAME_HELP, DATASET_NAME_PATTERN, Dataset, DatasetImport, DatasetVersion


class DatasetVersionSerializer(serializers.ModelSerializer):
    reference = serializers.CharField(help_text="NAME@VERSION, as jobs name it.")

    class Meta:
        model = DatasetVersion
        fields = [
            "number",
            "reference",
            "sha256",
            "size_bytes",
            "file_count",
            "source",
            "origin",
            "shared_path",
            "preview",
            "created_at",
        ]
        extra_kwargs = {
            "number": {"help_text": "Counts up from 1; a version never changes."},
            "sha256": {"help_text": "SHA-256 of the canonical archive of its files."},
            "size_bytes": {"help_text": "The files' bytes, added up."},
            "file_count": {"help_text": "How many files it holds."},
            "source": {"help_text": "upload, path (a shared file system) or url."},
            "origin": {"help_text": "The uploaded file's name, the path or the URL."},
            "shared_path": {"help_text": "For a path version: the folder jobs link to."},
            "preview": {"help_text": "files (capped), tables (first rows) and images."},
            "created_at": {"help_text": "When it was made."},
        }


# The fields a dataset shows in a list and on its own (a comment, not a docstring:
# drf-spectacular would copy a docstring into each schema component).
class DatasetBaseSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", help_text="Who keeps it.")
    lab = serializers.CharField(
        source="lab.name", allow_null=True, default=None, help_text="For lab visibility: the lab."
    )

    class Meta:
        model = Dataset
        fields = ["name", "owner", "visibility", "lab", "description", "created_at"]
        extra_kwargs = {
            "name": {"help_text": "Its name; jobs use NAME or NAME@VERSION."},
            "visibility": {"help_text": "Who may use it: private, lab or site."},
            "description": {"help_text": "What is in it."},
            "created_at": {"help_text": "When it was made."},
        }


class DatasetSerializer(DatasetBaseSerializer):
    versions = DatasetVersionSerializer(many=True, help_text="Newest first.")

    class Meta(DatasetBaseSerializer.Meta):
        fields = [*DatasetBaseSerializer.Meta.fields, "versions"]


class DatasetSummarySerializer(DatasetBaseSerializer):
    latest_version = DatasetVersionSerializer(
        allow_null=True, help_text="The newest version (without its preview's detail)."
    )

    class Meta(DatasetBaseSerializer.Meta):
        fields = [*DatasetBaseSerializer.Meta.fields, "latest_version"]


class DatasetImportSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", help_text="The import's id.")
    percent = serializers.IntegerField(allow_null=True, help_text="How far it has read.")
    version = serializers.CharField(
        source="version.reference",
        allow_null=True,
        default=None,
        help_text="Once done: NAME@VERSION of the version it made (or found unchanged).",
    )

    class Meta:
        model = DatasetImport
        fields = [
            "id",
            "name",
            "source",
            "origin",
            "state",
            "message",
            "bytes_done",
            "bytes_total",
            "percent",
            "version",
            "created_at",
            "finished_at",
        ]
        extra_kwargs = {
            "name": {"help_text": "The dataset it makes, or adds a version to."},
            "source": {"help_text": "upload, path (a shared file system) or url."},
            "origin": {"help_text": "The uploaded file's name, the path or the URL."},
            "state": {"help_text": "waiting, running, done or failed."},
            "message": {"help_text": "Why it failed, or what it made."},
            "bytes_done": {"help_text": "Bytes read and checksummed so far."},
            "bytes_total": {"help_text": "Bytes to read, once known."},
            "created_at": {"help_text": "When it was asked for."},
            "finished_at": {"help_text": "When it ended, done or failed."},
        }


class DatasetImportInputSerializer(serializers.Serializer):
    name = serializers.RegexField(
        DATASET_NAME_PATTERN,
        max_length=80,
        error_messages={"invalid": DATASET_NAME_HELP},
        help_text="The dataset's name; one of yours gets a new version.",
    )
    description = serializers.CharField(
        required=False, default="", max_length=500, allow_blank=True, help_text="What is in it."
    )
    visibility = serializers.ChoiceField(
        choices=Dataset.Visibility.choices,
        default=Dataset.Visibility.PRIVATE,
        help_text="Who may use it: private, lab or site (site: administrators only).",
    )
    lab = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=100,
        help_text="For lab visibility: the lab's name.",
    )
    file = serializers.FileField(
        required=False, help_text="A .zip or .tar.gz of a folder, or a single file."
    )
    url = serializers.CharField(
        required=False,
        max_length=2000,
        help_text="Instead of a file: an https URL the portal fetches once and checksums.",
    )
    # No default: "" is not a SHA-256, and a default must fit its own schema.
    sha256 = serializers.RegexField(
        r"^[0-9a-fA-F]{64}$",
        required=False,
        help_text="With url: the SHA-256 the fetched file must have.",
    )
    path = serializers.CharField(
        required=False,
        max_length=1000,
        help_text="Instead of a file: a folder on the shared file system, inside the roots "
        "the site allows.",
    )

    def validate(self, data: dict) -> dict:
        if len([key for key in ("file", "url", "path") if data.get(key)]) != 1:
            raise serializers.ValidationError("Send one of a file, a url or a shared path.")
        return data
