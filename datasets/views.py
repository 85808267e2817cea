from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from . import services, storage
from .forms import DatasetForm
from .models import Dataset, DatasetImport
from .selectors import (
    dataset_imports_unfinished,
    dataset_lineage,
    dataset_list_visible_to,
    dataset_may_change,
)


def _visible_or_404(request: HttpRequest, pk: int) -> Dataset:
    dataset = dataset_list_visible_to(request.user).filter(pk=pk).first()
    if dataset is None:
        raise Http404("No such dataset.")
    return dataset


@login_required
def dataset_list(request: HttpRequest) -> HttpResponse:
    datasets = dataset_list_visible_to(request.user).prefetch_related("versions")
    return render(
        request,
        "datasets/list.html",
        {
            "datasets": datasets,
            "imports": dataset_imports_unfinished(request.user),
        },
    )


@login_required
def dataset_new(request: HttpRequest) -> HttpResponse:
    form = DatasetForm(
        request.POST or None,
        request.FILES or None,
        user=request.user,
        initial={"name": request.GET.get("name", "")[:80]},
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        common = {
            "user": request.user,
            "name": data["name"],
            "visibility": data["visibility"],
            "lab": data.get("lab"),
            "description": data["description"],
        }
        try:
            if data.get("file"):
                imported = services.dataset_import_from_upload(upload=data["file"], **common)
            elif data.get("url"):
                imported = services.dataset_import_from_url(
                    url=data["url"], sha256=data.get("sha256") or "", **common
                )
            else:
                imported = services.dataset_import_from_path(path=data["path"], **common)
        except services.DatasetError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            return redirect("datasets:import", public_id=imported.public_id)
    return render(request, "datasets/new.html", {"form": form}, status=400 if form.errors else 200)


@login_required
def dataset_import_detail(request: HttpRequest, public_id) -> HttpResponse:
    imported = get_object_or_404(DatasetImport, public_id=public_id, owner=request.user)
    if imported.state == DatasetImport.State.DONE and imported.version_id:
        messages.success(request, imported.message)
        return redirect("datasets:detail", pk=imported.version.dataset_id)
    return render(request, "datasets/import.html", {"imported": imported})


@login_required
def dataset_detail(request: HttpRequest, pk: int) -> HttpResponse:
    dataset = _visible_or_404(request, pk)
    versions = list(dataset.versions.order_by("-number"))
    return render(
        request,
        "datasets/detail.html",
        {
            "dataset": dataset,
            "versions": versions,
            "may_change": dataset_may_change(request.user, dataset),
            "lineage": dataset_lineage(request.user, dataset),
        },
    )


@login_required
def dataset_thumbnail(request: HttpRequest, pk: int, number: int, index: int) -> FileResponse:
    version = _visible_or_404(request, pk).versions.filter(number=number).first()
    images = (version.preview.get("images") or []) if version else []
    if index >= len(images):
        raise Http404("No such thumbnail.")
    path = storage.thumbnails_dir(version.sha256) / f"{index}.png"
    if not path.is_file():
        raise Http404("No such thumbnail.")
    return FileResponse(open(path, "rb"), content_type="image/png")


@login_required
@require_POST
def dataset_delete(request: HttpRequest, pk: int) -> HttpResponse:
    dataset = _visible_or_404(request, pk)
    if not dataset_may_change(request.user, dataset):
        return HttpResponse("Only its owner may delete it.", status=403)
    try:
        services.dataset_delete(user=request.user, dataset=dataset)
    except services.DatasetError as exc:
        messages.error(request, exc.message)
        return redirect("datasets:detail", pk=dataset.pk)
    messages.success(request, f"{dataset.name} is deleted.")
    return redirect("datasets:list")
