from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from jobs.services import JobSubmissionError
from model_registry.models import ModelVersion, lab_slug
from model_registry.selectors import card_html, card_summary, model_versions_visible_to
from model_registry.web import catalogue_filters
from plumbing.panels import Panel

from .forms import ModelServeForm, TemplatePublishForm, TemplateRunForm, labs_led_by
from .models import TemplateRun, TemplateVersion
from .parameters import parameters_from_json
from .selectors import (
    serving_templates_for,
    template_list_visible_to,
    template_versions_of,
    template_versions_visible_to,
)
from .services import TemplateError, model_serve, template_publish, template_run


@login_required
def template_catalogue(request: HttpRequest, lab: str | None = None) -> HttpResponse:
    """The site's templates (everything the user may see), or one lab's, with search."""
    filters = catalogue_filters(request, lab, lab_url="job_templates:lab")
    listings = template_list_visible_to(
        request.user, query=filters["query"], lab=filters["lab"], visibility=filters["visibility"]
    )
    return render(
        request,
        "job_templates/list.html",
        {
            **filters,
            "all_url": reverse("job_templates:list"),
            "search_hint": "name, title or words in its card",
            "listings": [(listing, card_summary(listing.latest.card)) for listing in listings],
            "may_publish": labs_led_by(request.user).exists(),
        },
    )


def _version_or_404(request: HttpRequest, pk: int) -> TemplateVersion:
    version = template_versions_visible_to(request.user).filter(pk=pk).first()
    if version is None:
        raise Http404("No such template that you may see.")
    return version


def _show_error(form, exc: TemplateError | JobSubmissionError) -> None:
    form.add_error(exc.field if exc.field in form.fields else None, exc.message)


@login_required
def template_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A template's card and its short form; submitting the form runs it."""
    version = _version_or_404(request, pk)
    parameters = parameters_from_json(version.parameters)
    form = TemplateRunForm(
        request.POST or None, user=request.user, parameters=parameters, default_name=version.title
    )
    if request.method == "POST" and form.is_valid():
        lab = form.cleaned_data.get("lab")
        try:
            job = template_run(
                user=request.user,
                version=version,
                values=form.values,
                name=form.cleaned_data["run_name"],
                lab_id=lab.pk if lab else None,
            )
        except (TemplateError, JobSubmissionError) as exc:
            _show_error(form, exc)
        else:
            return redirect("jobs:detail", public_id=job.public_id)
    is_lead = labs_led_by(request.user).filter(pk=version.template.lab_id).exists()
    return render(
        request,
        "job_templates/detail.html",
        {
            "version": version,
            "card": card_html(version.card),
            "form": form,
            "parameters": parameters,
            "versions": template_versions_of(request.user, version.template),
            "lab_slug": lab_slug(version.template.lab),
            "is_lead": is_lead,
            "runs": version.runs.count(),
        },
        status=400 if form.errors else 200,
    )


@login_required
def template_publish_page(request: HttpRequest) -> HttpResponse:
    """For a lab's leads: a new template, or a new version of one (?from=VERSION)."""
    if not labs_led_by(request.user).exists():
        raise Http404("Only a lab's leads publish templates.")
    initial = {}
    start_from = request.GET.get("from", "")
    if start_from.isdigit():
        base = template_versions_visible_to(request.user).filter(pk=int(start_from)).first()
        if base is not None:
            initial = {**_initial_from(base), "project_from": base.pk}
    form = TemplatePublishForm(
        request.POST or None, request.FILES or None, user=request.user, initial=initial
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        # Whether the lead may see it is the service's to check, and to say.
        project_from = None
        if data["project_from"]:
            project_from = TemplateVersion.objects.filter(pk=data["project_from"]).first()
        try:
            version = template_publish(
                user=request.user,
                lab=data["lab"],
                name=data["name"],
                title=data["title"],
                project=data["project"],
                entry_command=data["entry_command"],
                card=data["card"],
                visibility=data["visibility"],
                serve_command=data["serve_command"],
                software=data["software"],
                datasets=data["datasets"],
                models=data["models"],
                resources=form.resources,
                parameters=data["parameters"],
                project_from=project_from,
            )
        except TemplateError as exc:
            _show_error(form, exc)
        else:
            return redirect("job_templates:detail", pk=version.pk)
    return render(
        request, "job_templates/publish.html", {"form": form}, status=400 if form.errors else 200
    )


def _initial_from(version: TemplateVersion) -> dict:
    resources = version.resources
    return {
        "lab": version.template.lab_id,
        "name": version.template.name,
        "title": version.title,
        "visibility": version.visibility,
        "entry_command": version.entry_command,
        "serve_command": version.serve_command,
        "software": version.software,
        "datasets": version.datasets,
        "models": version.input_models,
        "card": version.card,
        "parameters": json.dumps(version.parameters, indent=2),
        **{key: value for key, value in resources.items() if key != "output_paths"},
        "output_paths": ", ".join(resources.get("output_paths") or ["outputs"]),
    }


def model_version_panel(*, user, version: ModelVersion) -> Panel | None:
    """The model page's Serve button, when a template the user may run can serve it."""
    templates = serving_templates_for(user, version)
    if not templates:
        return None
    return Panel(
        "job_templates/_serve_panel.html",
        {"version": version, "template": templates[0], "others": len(templates) > 1},
    )


def job_panel(*, user, job) -> Panel | None:
    """The job page's line naming the template it was run from."""
    run = TemplateRun.objects.filter(job=job).select_related("version__template__lab").first()
    if run is None or not template_versions_visible_to(user).filter(pk=run.version_id).exists():
        return None
    return Panel("job_templates/_job_panel.html", {"run": run})


@login_required
def model_serve_page(request: HttpRequest, pk: int) -> HttpResponse:
    """POST from the model's page serves it with the first template that can; GET offers a
    choice among them."""
    model_version = model_versions_visible_to(request.user).filter(pk=pk).first()
    if model_version is None:
        raise Http404("No such model version that you may see.")
    templates = serving_templates_for(request.user, model_version)
    data = request.POST.copy() if request.method == "POST" else None
    if data is not None and "template" not in data and templates:
        data["template"] = str(templates[0].pk)
    form = ModelServeForm(data, templates=templates)
    if data is not None and templates and form.is_valid():
        chosen = next(t for t in templates if str(t.pk) == form.cleaned_data["template"])
        try:
            job = model_serve(
                user=request.user, model_version=model_version, template_version=chosen
            )
        except (TemplateError, JobSubmissionError) as exc:
            _show_error(form, exc)
        else:
            return redirect("jobs:detail", public_id=job.public_id)
    return render(
        request,
        "job_templates/serve.html",
        {
            "model_version": model_version,
            "form": form,
            "templates": templates,
        },
        status=400 if form.errors else 200,
    )
