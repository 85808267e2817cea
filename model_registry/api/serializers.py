from __future__ import annotations

from rest_framework import serializers

from labs.models import Visibility

from ..cards import card_html
from ..models import MODEL_NAME_HELP, MODEL_NAME_PATTERN, ModelVersion
from ..services import MAX_CARD_CHARACTERS, MAX_MODEL_FILES


class ModelFileSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="Inside the model, e.g. model.pt.")
    size = serializers.IntegerField(help_text="Bytes.")


def card_field() -> serializers.CharField:
    """A catalogue entry's card as its author writes it (models, templates)."""
    return serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=MAX_CARD_CHARACTERS,
        trim_whitespace=False,
        help_text="Markdown; raw HTML is shown as text.",
    )


# What a catalogue's versions (models, templates) all show: who published it, its number and
# when. (Comments, not docstrings: drf-spectacular would copy a docstring into each schema
# component.)
class PublishedVersionSerializer(serializers.ModelSerializer):
    published_by = serializers.CharField(
        source="published_by.get_username",
        allow_null=True,
        default=None,
        help_text="Who published it.",
    )

    class Meta:
        extra_kwargs = {
            "number": {"help_text": "Counts up from 1; a version never changes."},
            "created_at": {"help_text": "When it was published."},
        }


# A version as the catalogue lists it.
class ModelVersionSummarySerializer(PublishedVersionSerializer):
    reference = serializers.CharField(help_text="LAB/NAME@VERSION, as jobs and the CLI name it.")
    name = serializers.CharField(source="model.name", help_text="The model's name.")
    lab = serializers.CharField(source="model.lab.name", help_text="The lab it is published in.")

    class Meta:
        model = ModelVersion
        fields = [
            "reference",
            "name",
            "lab",
            "number",
            "visibility",
            "sha256",
            "size_bytes",
            "file_count",
            "metrics",
            "published_by",
            "created_at",
        ]
        extra_kwargs = {
            **PublishedVersionSerializer.Meta.extra_kwargs,
            "visibility": {"help_text": "Who may see and use it: private, lab or site."},
            "sha256": {"help_text": "SHA-256 of the canonical archive of its files."},
            "size_bytes": {"help_text": "The files' bytes, added up."},
            "file_count": {"help_text": "How many files it holds."},
            "metrics": {
                "help_text": "final: each metric at the job's last step; best: each "
                "metric's best value, its step and goal (min or max)."
            },
        }


class ModelVersionSerializer(ModelVersionSummarySerializer):
    files = ModelFileSerializer(many=True, help_text="Its files.")
    card_html = serializers.SerializerMethodField(help_text="The card, as cleaned HTML.")
    job = serializers.UUIDField(
        source="job.public_id",
        allow_null=True,
        default=None,
        help_text="The job it was published from; null once that job is deleted.",
    )

    class Meta(ModelVersionSummarySerializer.Meta):
        fields = [
            *ModelVersionSummarySerializer.Meta.fields,
            "card",
            "card_html",
            "files",
            "lineage",
            "job",
        ]
        extra_kwargs = {
            **ModelVersionSummarySerializer.Meta.extra_kwargs,
            "card": {"help_text": "The card as written, in Markdown."},
            "lineage": {
                "help_text": "job, environment, datasets, models and the "
                "reproducibility record (files' SHA-256, entry command, arguments, "
                "seed, parameters, container image, Python)."
            },
        }

    def get_card_html(self, version: ModelVersion) -> str:
        return str(card_html(version.card))


class ModelPublishSerializer(serializers.Serializer):
    job = serializers.CharField(
        max_length=36,
        help_text="A finished job of yours whose outputs are ready: its id, or the start of it "
        "as `nightshift list` shows it.",
    )
    name = serializers.RegexField(
        MODEL_NAME_PATTERN,
        max_length=80,
        error_messages={"invalid": MODEL_NAME_HELP},
        help_text="The model's name in its lab; an existing one gets a new version.",
    )
    files = serializers.ListField(
        child=serializers.CharField(max_length=1000),
        min_length=1,
        max_length=MAX_MODEL_FILES,
        help_text="Output files of the job, as its outputs list names them "
        "(outputs/model.pt); in the model, without the kept folder (model.pt).",
    )
    card = card_field()
    visibility = serializers.ChoiceField(
        choices=Visibility.choices,
        default=Visibility.LAB,
        help_text="private, lab or site (site: the lab's leads and admins).",
    )
    lab = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="The lab to publish in, by name; empty: the job's lab.",
    )
