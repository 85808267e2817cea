"""/api/v1/models/: list and publish, a version's record, its archive."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import FileResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from datasets.services import archive_download
from jobs.models import Job
from jobs.selectors import AmbiguousJobId, job_get_visible
from labs.selectors import lab_by_name
from plumbing.api import ApiError, Pagination, error_responses, page_responses

from ..delivery import archive_name
from ..models import ModelVersion
from ..selectors import lab_for_slug, model_list_visible_to, model_version_get_visible
from ..services import ModelError, model_publish
from .serializers import (
    ModelPublishSerializer,
    ModelVersionSerializer,
    ModelVersionSummarySerializer,
)


def version_or_404(request: Request, lab: str, name: str, number: int | None) -> ModelVersion:
    reference = f"{lab}/{name}" + (f"@{number}" if number is not None else "")
    version = model_version_get_visible(request.user, reference)
    if version is None:
        raise ApiError(
            f"No model {reference[:200]!r} that you may use.", code="not_found", status_code=404
        )
    return version


def catalogue_params(request: Request) -> dict:
    """A catalogue's filters from the query: lab (as references name it), q, visibility."""
    lab = None
    if request.query_params.get("lab"):
        lab = lab_for_slug(request.query_params["lab"][:63])
        if lab is None:
            raise ApiError("No such lab.", code="not_found", status_code=404)
    return {
        "lab": lab,
        "query": request.query_params.get("q", "").strip()[:100],
        "visibility": request.query_params.get("visibility", ""),
    }


def catalogue_parameters(words: str) -> list[OpenApiParameter]:
    """The catalogue's filters as the API's document describes them; `words` says what q
    searches."""
    return [
        OpenApiParameter("q", str, description=words),
        OpenApiParameter("lab", str, description="One lab's, as references name it."),
        OpenApiParameter("visibility", str, description="private, lab or site."),
    ]


# A catalogue (models, templates): a page of each entry's newest version the user may see,
# filtered by catalogue_params; `listings(user, **filters)` says whose. (A comment, not a
# docstring: the API's document would show a docstring as every subclass's description.)
class CatalogueListView(GenericAPIView):
    pagination_class = Pagination

    def listings(self, user, **filters) -> list:
        raise NotImplementedError

    def page(self) -> Response:
        listings = self.listings(self.request.user, **catalogue_params(self.request))
        page = self.paginate_queryset([listing.latest for listing in listings])
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class ModelListView(CatalogueListView):
    serializer_class = ModelVersionSummarySerializer
    queryset = ModelVersion.objects.none()

    def listings(self, user, **filters) -> list:
        return model_list_visible_to(user, **filters)

    @extend_schema(
        summary="The models you may use, each by its newest version you may see",
        parameters=catalogue_parameters("Words in the name or the card."),
        responses=page_responses(ModelVersionSummarySerializer, 401),
    )
    def get(self, request: Request) -> Response:
        return self.page()

    @extend_schema(
        summary="Publish a finished job's output files as a new model version",
        description="The files are checked as outputs are (no links, nothing outside what "
        "the job keeps), packed into a canonical archive, and stored by its SHA-256. The "
        "version keeps the job's final and best metrics and its lineage, and never changes.",
        request=ModelPublishSerializer,
        responses={201: ModelVersionSerializer, **error_responses(400, 401, 404)},
    )
    def post(self, request: Request) -> Response:
        form = ModelPublishSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            job = job_get_visible(request.user, data["job"])
        except (Job.DoesNotExist, ValidationError):
            raise ApiError("No such job of yours.", code="not_found", status_code=404) from None
        except AmbiguousJobId as exc:
            raise ApiError(str(exc), code="ambiguous", status_code=400, field="job") from None
        lab = None
        if data.get("lab"):
            lab = lab_by_name(data["lab"])
            if lab is None:
                raise ApiError(
                    f"No lab called {data['lab']!r}.", code="invalid", status_code=400, field="lab"
                )
        try:
            version = model_publish(
                user=request.user,
                job=job,
                name=data["name"],
                files=data["files"],
                card=data["card"],
                visibility=data["visibility"],
                lab=lab,
            )
        except ModelError as exc:
            raise ApiError(exc.message, code="invalid", status_code=400, field=exc.field) from None
        return Response(ModelVersionSerializer(version).data, status=status.HTTP_201_CREATED)


class ModelVersionView(APIView):
    @extend_schema(
        summary="A model version: its card, files, metrics and lineage",
        description="Without a version number: the newest you may see.",
        responses={200: ModelVersionSerializer, **error_responses(401, 404)},
    )
    def get(self, request: Request, lab: str, name: str, number: int | None = None) -> Response:
        return Response(ModelVersionSerializer(version_or_404(request, lab, name, number)).data)


class ModelArchiveView(APIView):
    @extend_schema(
        summary="A model version's files as its canonical archive (an uncompressed tar)",
        description="The archive's SHA-256 is the version's, also sent as X-Checksum-Sha256.",
        responses={(200, "application/x-tar"): bytes, **error_responses(401, 404)},
    )
    def get(self, request: Request, lab: str, name: str, number: int) -> FileResponse:
        version = version_or_404(request, lab, name, number)
        try:
            return archive_download(version.sha256, archive_name(version))
        except FileNotFoundError:
            raise ApiError(
                f"{version.reference} is no longer stored.", code="not_found", status_code=404
            ) from None
