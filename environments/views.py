from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from jobs.services import JobSubmissionError

from . import builds, services
from .forms import EnvironmentForm, VersionForm
from .models import Environment
from .selectors import environment_list_usable_by, environment_may_change


def _usable_or_404(request: HttpRequest, pk: int) -> Environment:
    environment = (
        environment_list_usable_by(request.user, include_automatic=True).filter(pk=pk).first()
    )
    if environment is None:
        raise Http404("No such environment.")
    return environment


def _show(form, exc: services.EnvironmentError) -> None:
    field = exc.field if exc.field in form.fields else None
    form.add_error(field, exc.message)
    form.tool_report = exc.detail


@login_required
def environment_list(request: HttpRequest) -> HttpResponse:
    environments = environment_list_usable_by(request.user).prefetch_related("versions")
    return render(request, "environments/list.html", {"environments": environments})


@login_required
def environment_new(request: HttpRequest) -> HttpResponse:
    form = EnvironmentForm(request.POST or None, request.FILES or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            environment = services.environment_create(
                user=request.user,
                name=data["name"],
                description=data["description"],
                visibility=data["visibility"],
                lab=data.get("lab"),
                **form.version_fields(),
            )
        except services.EnvironmentError as exc:
            _show(form, exc)
        else:
            messages.success(request, f"{environment.name} is ready: version 1 is locked.")
            return redirect("environments:detail", pk=environment.pk)
    return render(
        request, "environments/new.html", {"form": form}, status=400 if form.errors else 200
    )


@login_required
def environment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    environment = _usable_or_404(request, pk)
    may_change = environment_may_change(request.user, environment)
    form = VersionForm(request.POST or None, request.FILES or None) if may_change else None
    if request.method == "POST":
        if form is None:
            return HttpResponse("Only its owner may add versions.", status=403)
        if form.is_valid():
            try:
                version = services.environment_version_add(
                    user=request.user, environment=environment, **form.version_fields()
                )
            except services.EnvironmentError as exc:
                _show(form, exc)
            else:
                messages.success(request, f"Version {version.number} is locked.")
                return redirect("environments:detail", pk=environment.pk)
    versions = []
    for version in environment.versions.order_by("-number"):
        build = builds.latest_build(version)
        versions.append((version, builds.build_report(build) if build else None))
    return render(
        request,
        "environments/detail.html",
        {
            "environment": environment,
            "versions": versions,
            "form": form,
            "may_change": may_change,
        },
        status=400 if form is not None and form.errors else 200,
    )


@login_required
def environment_lock(request: HttpRequest, pk: int, number: int) -> HttpResponse:
    version = _usable_or_404(request, pk).versions.filter(number=number).first()
    if version is None or not version.lock:
        raise Http404("That version has no lock.")
    response = HttpResponse(version.lock, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="environment-{pk}-v{number}-requirements.lock.txt"'
    )
    return response


@login_required
@require_POST
def environment_build(request: HttpRequest, pk: int, number: int) -> HttpResponse:
    version = _usable_or_404(request, pk).versions.filter(number=number).first()
    if version is None:
        raise Http404("No such version.")
    try:
        build = builds.environment_test_build(user=request.user, version=version)
    except JobSubmissionError as exc:
        messages.error(request, f"The test build was not started: {exc.message}")
        return redirect("environments:detail", pk=pk)
    messages.success(request, f"Test build of {version.reference} submitted; its log is below.")
    return redirect("jobs:detail", public_id=build.job.public_id)


@login_required
@require_POST
def environment_delete(request: HttpRequest, pk: int) -> HttpResponse:
    environment = _usable_or_404(request, pk)
    if not environment_may_change(request.user, environment):
        return HttpResponse("Only its owner may delete it.", status=403)
    services.environment_delete(user=request.user, environment=environment)
    messages.success(request, f"{environment.name} is deleted; jobs that used it keep its lock.")
    return redirect("environments:list")
