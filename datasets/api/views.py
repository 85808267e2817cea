"""/api/v1/datasets/: list, import (upload or shared path), show and delete."""

from __future__ import annotations

from django.http import FileResponse
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labs.selectors import lab_by_name
from plumbing.api import ApiError, VisibleListView, error_responses, page_responses
from plumbing.names import named_in_address

from .. import delivery, services, storage
from ..models import Dataset, DatasetImport
from ..selectors import dataset_get_visible, dataset_list_visible_to, dataset_may_change
from .serializers import (
    DatasetImportInputSerializer,
    DatasetImportSerializer,
    DatasetSerializer,
    DatasetSummarySerializer,
)


def dataset_or_404(request: Request, name: str) -> Dataset:
    """The dataset a URL names; ?owner=USERNAME (or site) says whose, where several owners
    offer the name."""
    return named_in_address(
        "dataset",
        lambda reference: dataset_get_visible(request.user, reference),
        name,
        request.query_params.get("owner"),
    )


class DatasetListView(VisibleListView):
    serializer_class = DatasetSummarySerializer
    queryset = Dataset.objects.none()
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    def visible(self, user):
        return dataset_list_visible_to(user).prefetch_related("versions")

    @extend_schema(
        summary="List the datasets you may use: yours, your labs' and the site's",
        responses=page_responses(DatasetSummarySerializer, 401),
    )
    def get(self, request: Request) -> Response:
        return self.page()

    @extend_schema(
        summary="Import a dataset, or a new version of one of yours",
        description="An uploaded file (a .zip or .tar.gz of a folder, or one file), an https "
        "URL the portal fetches, or a folder on the shared file system. The files are checked, "
        "packed and checksummed in the background: follow the import at "
        "/api/v1/dataset-imports/ID/. Nothing is visible until it has succeeded; the same "
        "content as the latest version makes no new one.",
        request={
            "multipart/form-data": DatasetImportInputSerializer,
            "application/json": DatasetImportInputSerializer,
        },
        responses={202: DatasetImportSerializer, **error_responses(400, 401)},
    )
    def post(self, request: Request) -> Response:
        form = DatasetImportInputSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = dict(form.validated_data)
        lab_name = data.pop("lab", "")
        lab = lab_by_name(lab_name)
        common = {
            "user": request.user,
            "name": data["name"],
            "visibility": data["visibility"],
            "description": data["description"],
            "lab": lab,
        }
        try:
            if data.get("file"):
                imported = services.dataset_import_from_upload(upload=data["file"], **common)
            elif data.get("url"):
                imported = services.dataset_import_from_url(
                    url=data["url"], sha256=data.get("sha256", ""), **common
                )
            else:
                imported = services.dataset_import_from_path(path=data["path"], **common)
        except services.DatasetError as exc:
            raise ApiError(exc.message, code="invalid", status_code=400, field=exc.field) from None
        return Response(DatasetImportSerializer(imported).data, status=status.HTTP_202_ACCEPTED)


class DatasetDetailView(APIView):
    @extend_schema(
        summary="A dataset with every version and its preview",
        responses={200: DatasetSerializer, **error_responses(401, 404)},
    )
    def get(self, request: Request, name: str) -> Response:
        return Response(DatasetSerializer(dataset_or_404(request, name)).data)

    @extend_schema(
        summary="Delete a dataset you own, with all its versions",
        description="Refused (409) while a job that has not ended uses any of its versions.",
        responses={204: None, **error_responses(401, 403, 404, 409)},
    )
    def delete(self, request: Request, name: str) -> Response:
        dataset = dataset_or_404(request, name)
        if not dataset_may_change(request.user, dataset):
            raise ApiError(
                "Only its owner (or an administrator) may delete it.",
                code="forbidden",
                status_code=403,
            )
        try:
            services.dataset_delete(user=request.user, dataset=dataset)
        except services.DatasetError as exc:
            raise ApiError(exc.message, code="conflict", status_code=409) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class DatasetArchiveView(APIView):
    @extend_schema(
        summary="A version's files as its canonical archive (an uncompressed tar)",
        description="The archive's SHA-256 is the version's. A version registered from a "
        "shared folder is not kept by the portal: read it where it is.",
        responses={(200, "application/x-tar"): bytes, **error_responses(401, 404, 409)},
    )
    def get(self, request: Request, name: str, number: int) -> FileResponse:
        dataset = dataset_or_404(request, name)
        version = dataset.versions.filter(number=number).first()
        if version is None:
            raise ApiError(
                f"{dataset.name} has no version {number}.", code="not_found", status_code=404
            )
        if version.is_shared_path:
            raise ApiError(
                f"{version.reference} is on the shared file system at "
                f"{version.shared_path}; read it there.",
                code="conflict",
                status_code=409,
            )
        try:
            return storage.archive_download(version.sha256, f"{dataset.name}-{number}.tar")
        except FileNotFoundError:
            raise ApiError(
                f"{version.reference} is no longer stored.", code="not_found", status_code=404
            ) from None


class DatasetImportDetailView(APIView):
    @extend_schema(
        summary="How an import of yours is going",
        responses={200: DatasetImportSerializer, **error_responses(401, 404)},
    )
    def get(self, request: Request, public_id) -> Response:
        imported = DatasetImport.objects.filter(public_id=public_id, owner=request.user).first()
        if imported is None:
            raise ApiError("No such import of yours.", code="not_found", status_code=404)
        return Response(DatasetImportSerializer(imported).data)


class DatasetDeliveryView(APIView):
    """For workstations: the launcher of a job fetches its datasets here with the job's own
    credential (not a user's token), which is good while the job has not ended."""

    authentication_classes = ()
    permission_classes = ()

    @extend_schema(
        summary="A dataset archive for a job's launcher (a job's credential, not a user's)",
        description="Send `Authorization: Bearer <the job's .nightshift/credential>`; the "
        "archive is sent only if the job was given that dataset and has not ended. Its SHA-256 "
        "is in `X-Checksum-Sha256`. Each delivery is recorded.",
        auth=[],
        responses={(200, "application/x-tar"): bytes, **error_responses(401, 404)},
    )
    def get(self, request: Request, sha256: str):
        scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
        try:
            storage.archive_path(sha256)
        except ValueError:
            raise ApiError("Not a dataset archive.", code="not_found", status_code=404) from None
        try:
            return delivery.dataset_delivery(
                credential=credential.strip() if scheme.lower() == "bearer" else "",
                sha256=sha256,
                workstation=request.headers.get("X-Nightshift-Workstation", ""),
                remote_address=request.META.get("REMOTE_ADDR") or None,
            )
        except delivery.DeliveryRefused as exc:
            code = "not_authenticated" if exc.status == 401 else "not_found"
            raise ApiError(exc.message, code=code, status_code=exc.status) from None
