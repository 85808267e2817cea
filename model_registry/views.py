from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from datasets.services import archive_download
from jobs.models import Job
from jobs.selectors import job_get_visible, job_output_files
from labs.models import Membership, Visibility
from plumbing.panels import panels_for

from .cards import card_html, card_summary
from .delivery import archive_name
from .forms import PublishForm, suggested_name
from .models import ModelVersion, lab_slug
from .selectors import (
    lab_for_slug,
    model_list_visible_to,
    model_versions_of,
    model_versions_visible_to,
)
from .services import ModelError, model_may_publish_from, model_publish


def catalogue_filters(request: HttpRequest, lab: str | None, *, lab_url: str) -> dict:
    """A catalogue page's filters (its lab, search words, visibility) and the links to each
    of the user's labs' pages (the URL named `lab_url`), for models/_filters.html."""
    the_lab = None
    if lab is not None:
        the_lab = lab_for_slug(lab)
        if the_lab is None:
            raise Http404("No such lab.")
    memberships = Membership.objects.filter(user=request.user).select_related("lab")
    return {
        "lab": the_lab,
        "query": request.GET.get("q", "").strip()[:100],
        "visibility": request.GET.get("visibility", ""),
        "visibilities": Visibility.choices,
        "lab_links": [(reverse(lab_url, args=[lab_slug(m.lab)]), m.lab) for m in memberships],
    }


@login_required
def model_catalogue(request: HttpRequest, lab: str | None = None) -> HttpResponse:
    """The site's models (everything the user may see), or one lab's, with search."""
    filters = catalogue_filters(request, lab, lab_url="models:lab")
    listings = model_list_visible_to(
        request.user, query=filters["query"], lab=filters["lab"], visibility=filters["visibility"]
    )
    return render(
        request,
        "models/list.html",
        {
            **filters,
            "all_url": reverse("models:list"),
            "search_hint": "name or words in its card",
            "listings": [(listing, card_summary(listing.latest.card)) for listing in listings],
        },
    )


def _version_or_404(request: HttpRequest, pk: int) -> ModelVersion:
    version = model_versions_visible_to(request.user).filter(pk=pk).first()
    if version is None:
        raise Http404("No such model version that you may see.")
    return version


@login_required
def model_version_detail(request: HttpRequest, pk: int) -> HttpResponse:
    version = _version_or_404(request, pk)
    best = version.metrics.get("best") or {}
    final = version.metrics.get("final") or {}
    metrics = [(name, final.get(name), best.get(name)) for name in dict.fromkeys([*final, *best])]
    return render(
        request,
        "models/version.html",
        {
            "version": version,
            "card": card_html(version.card),
            "metrics": metrics,
            "versions": model_versions_of(request.user, version.model),
            "lineage": version.lineage,
            "lab_slug": lab_slug(version.model.lab),
            "panels": panels_for("model_version", user=request.user, version=version),
        },
    )


@login_required
def model_version_archive(request: HttpRequest, pk: int) -> FileResponse:
    version = _version_or_404(request, pk)
    try:
        return archive_download(version.sha256, archive_name(version))
    except FileNotFoundError:
        raise Http404(f"{version.reference} is no longer stored.") from None


@login_required
def model_publish_from_job(request: HttpRequest, public_id) -> HttpResponse:
    try:
        job = job_get_visible(request.user, public_id)
    except (Job.DoesNotExist, ValidationError, ValueError):
        raise Http404("No such job.") from None
    if not model_may_publish_from(request.user, job):
        raise Http404("No such job of yours.")
    outputs = job_output_files(job)
    form = PublishForm(
        request.POST or None,
        user=request.user,
        output_files=outputs,
        initial={
            "name": suggested_name(job.name),
            "lab": job.lab_id,
            "files": [file.path for file in outputs],
        },
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            version = model_publish(
                user=request.user,
                job=job,
                name=data["name"],
                files=data["files"],
                card=data["card"],
                visibility=data["visibility"],
                lab=data["lab"],
            )
        except ModelError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            return redirect("models:version", pk=version.pk)
    return render(
        request,
        "models/publish.html",
        {"form": form, "job": job},
        status=400 if form.errors else 200,
    )
