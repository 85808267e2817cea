"""Which template versions a user may see and run, and how often each was used."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from labs.models import Lab, Visibility
from model_registry.models import ModelVersion
from model_registry.selectors import REFERENCE, lab_for_slug, visible_to

from .models import JobTemplate, TemplateRun, TemplateVersion


def template_versions_visible_to(user) -> QuerySet[TemplateVersion]:
    versions = TemplateVersion.objects.select_related("template", "template__lab", "published_by")
    return visible_to(user, versions, lab_field="template__lab")


@dataclass(frozen=True)
class TemplateListing:
    """A template as the catalogue shows it: its newest version the user may see."""

    template: JobTemplate
    latest: TemplateVersion
    versions: int  # that the user may see
    runs: int  # jobs started from any of its versions


def template_list_visible_to(
    user, *, query: str = "", lab: Lab | None = None, visibility: str = ""
) -> list[TemplateListing]:
    """Templates with a version the user may see, newest first; `query` searches names,
    titles and cards, `lab` and `visibility` filter."""
    versions = template_versions_visible_to(user)
    if lab is not None:
        versions = versions.filter(template__lab=lab)
    if visibility in Visibility.values:
        versions = versions.filter(visibility=visibility)
    query = query.replace("\x00", "")  # PostgreSQL takes no NUL in a string
    if query:
        versions = versions.filter(
            Q(template__name__icontains=query)
            | Q(title__icontains=query)
            | Q(card__icontains=query)
        )
    newest = versions.order_by("template_id", "-number").distinct("template_id")
    counts = dict(
        versions.order_by()
        .values("template_id")
        .annotate(n=Count("pk"))
        .values_list("template_id", "n")
    )
    runs = template_run_counts([version.template_id for version in newest])
    listings = [
        TemplateListing(
            version.template, version, counts[version.template_id], runs.get(version.template_id, 0)
        )
        for version in newest
    ]
    return sorted(listings, key=lambda listing: listing.latest.created_at, reverse=True)


def template_run_counts(template_ids: list[int]) -> dict[int, int]:
    """How many jobs each template started, all versions together."""
    return dict(
        TemplateRun.objects.filter(version__template_id__in=template_ids)
        .order_by()
        .values("version__template_id")
        .annotate(n=Count("pk"))
        .values_list("version__template_id", "n")
    )


def template_version_get_visible(user, reference: str) -> TemplateVersion | None:
    """LAB/NAME@VERSION, LAB/NAME for its newest version the user may see, or NAME alone
    when exactly one template the user may see has that name."""
    text = str(reference).strip()
    match = REFERENCE.fullmatch(text) or REFERENCE.fullmatch(f"_/{text}")
    if match is None:
        return None
    versions = template_versions_visible_to(user).filter(template__name=match["name"])
    if "/" in text:
        lab = lab_for_slug(match["lab"])
        if lab is None:
            return None
        versions = versions.filter(template__lab=lab)
    elif versions.order_by().values("template_id").distinct().count() != 1:
        return None  # no template of that name, or one in each of several labs
    if match["number"]:
        return versions.filter(number=int(match["number"])).first()
    return versions.order_by("-number").first()


def template_versions_of(user, template: JobTemplate) -> QuerySet[TemplateVersion]:
    return (
        template_versions_visible_to(user)
        .filter(template=template)
        .annotate(run_count=Count("runs"))
        .order_by("-number")
    )


def serving_templates_for(user, model_version: ModelVersion) -> list[TemplateVersion]:
    """The template versions that can serve a model, for the user: the one whose run made
    it first (when it declares a serve command), then the newest version of each other
    template with one, in the model's lab or for the site."""
    visible = template_versions_visible_to(user).exclude(serve_command="")
    made_by = None
    if model_version.job_id is not None:
        run = TemplateRun.objects.filter(job_id=model_version.job_id).first()
        if run is not None:
            made_by = visible.filter(pk=run.version_id).first()
    others = (
        visible.filter(Q(template__lab=model_version.model.lab) | Q(visibility=Visibility.SITE))
        .order_by("template_id", "-number")
        .distinct("template_id")
    )
    found = [made_by] if made_by is not None else []
    return found + [v for v in others if made_by is None or v.template_id != made_by.template_id]


def projects_held(hashes: set[str]) -> set[str]:
    """Which of `hashes` are templates' projects, kept in the datasets' store."""
    return set(
        TemplateVersion.objects.filter(project_sha256__in=hashes).values_list(
            "project_sha256", flat=True
        )
    )
