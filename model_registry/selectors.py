"""Which model versions a user may see and use."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from labs.models import Lab, Visibility
from labs.selectors import shared_with

from .cards import card_html as card_html
from .cards import card_summary as card_summary
from .models import Model, ModelVersion

# LAB/NAME or LAB/NAME@VERSION, LAB as lab_slug() writes it.
REFERENCE = re.compile(
    r"(?P<lab>[A-Za-z0-9_]{1,63})/(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,79})"
    r"(?:@(?P<number>[0-9]{1,9}))?"
)


def visible_to(user, versions: QuerySet, *, lab_field: str) -> QuerySet:
    """The rule for what is published with a Visibility (model and template versions):
    for everyone, for the user's labs (`lab_field` names the version's lab), or privately
    by the user; staff see all."""
    return shared_with(user, versions, owner_field="published_by", lab_field=lab_field)


def model_versions_visible_to(user) -> QuerySet[ModelVersion]:
    versions = ModelVersion.objects.select_related("model", "model__lab", "published_by")
    return visible_to(user, versions, lab_field="model__lab")


@dataclass(frozen=True)
class ModelListing:
    """A model as the catalogue shows it: its newest version the user may see."""

    model: Model
    latest: ModelVersion
    versions: int  # that the user may see


def model_list_visible_to(
    user, *, query: str = "", lab: Lab | None = None, visibility: str = ""
) -> list[ModelListing]:
    """Models with at least one version the user may see, newest first; `query` searches
    names and cards, `lab` and `visibility` filter."""
    versions = model_versions_visible_to(user)
    if lab is not None:
        versions = versions.filter(model__lab=lab)
    if visibility in Visibility.values:
        versions = versions.filter(visibility=visibility)
    # PostgreSQL takes no NUL in a string; nothing searched for can hold one.
    query = query.replace("\x00", "")
    if query:
        versions = versions.filter(Q(model__name__icontains=query) | Q(card__icontains=query))
    # Each model's newest visible version (PostgreSQL's DISTINCT ON), and how many it has.
    newest = versions.defer("lineage", "files").order_by("model_id", "-number").distinct("model_id")
    counts = dict(
        versions.order_by().values("model_id").annotate(n=Count("pk")).values_list("model_id", "n")
    )
    listings = [
        ModelListing(version.model, version, counts[version.model_id]) for version in newest
    ]
    return sorted(listings, key=lambda listing: listing.latest.created_at, reverse=True)


LAB_SLUG = re.compile(r"[A-Za-z0-9_]{1,63}")


def lab_for_slug(slug: str) -> Lab | None:
    if not LAB_SLUG.fullmatch(slug):
        return None
    return (
        Lab.objects.filter(accounting_group__in=[f"group_{slug}", slug])
        .order_by("-accounting_group")  # group_x before x: the slug's own lab first
        .first()
    )


def model_version_get_visible(user, reference: str) -> ModelVersion | None:
    """LAB/NAME@VERSION, or LAB/NAME for its newest version the user may see."""
    match = REFERENCE.fullmatch(str(reference).strip())
    if match is None:
        return None
    lab = lab_for_slug(match["lab"])
    if lab is None:
        return None
    versions = model_versions_visible_to(user).filter(model__lab=lab, model__name=match["name"])
    if match["number"]:
        return versions.filter(number=int(match["number"])).first()
    return versions.order_by("-number").first()


def model_versions_of(user, model: Model) -> QuerySet[ModelVersion]:
    return model_versions_visible_to(user).filter(model=model).order_by("-number")
