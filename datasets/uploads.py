"""Resumable uploads (the tus 1.0 protocol, served by drf-tus): a dataset's file arrives in
chunks, survives a dropped connection, and continues from the last byte the portal kept.

    POST   /api/v1/dataset-uploads/         Upload-Length, Upload-Metadata (name, filename,
                                            visibility, lab, description): 201 and Location
    HEAD   /api/v1/dataset-uploads/<id>/    Upload-Offset: where to continue
    PATCH  /api/v1/dataset-uploads/<id>/    the next chunk at Upload-Offset
    GET    /api/v1/dataset-uploads/<id>/    its progress and, once complete, its import
    DELETE /api/v1/dataset-uploads/<id>/    give it up

The metadata is checked when the upload is created (a bad name or an upload over the storage
quota is refused before a byte is sent). When the last byte arrives, the file becomes a
dataset import, checked like any other. An upload left unfinished past its expiry
(DATASET_UPLOAD_EXPIRES_HOURS) is removed with its bytes by the import recovery.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, DataAndFiles
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework_tus import constants, tus_api_extensions
from rest_framework_tus.storage import AbstractUploadSaveHandler
from rest_framework_tus.views import UploadMetadata, UploadViewSet

from plumbing.api import ApiError, error_body, error_responses

from . import services, storage
from .models import DatasetUpload

TUS_ERROR_CODES = {404: "not_found", 409: "conflict", 413: "too_large", 460: "checksum_mismatch"}
# One PATCH holds at most this much; clients send smaller chunks (the CLI and the page: 8 MiB).
MAX_CHUNK_BYTES = 64 * 2**20


class ChunkParser(BaseParser):
    """A tus chunk, read from the request's stream with a bound (not Django's request.body,
    which holds at most DATA_UPLOAD_MAX_MEMORY_SIZE)."""

    media_type = "application/offset+octet-stream"

    def parse(self, stream, media_type=None, parser_context=None):
        chunk = stream.read(MAX_CHUNK_BYTES + 1) if stream is not None else b""
        if len(chunk) > MAX_CHUNK_BYTES:
            raise ParseError(f"Send at most {MAX_CHUNK_BYTES // 2**20} MiB in one PATCH.")
        return DataAndFiles({"chunk": chunk}, {})


class KnownLengthsOnly(UploadMetadata):
    """drf-tus's OPTIONS answer, less creation-defer-length: an upload says its length when
    it is created, so that the limits and the quota are checked before the first byte."""

    def determine_metadata(self, request, view) -> dict:
        metadata = super().determine_metadata(request, view)
        extensions = [name for name in tus_api_extensions if name != "creation-defer-length"]
        metadata["Tus-Extension"] = ",".join(extensions)
        return metadata


class DatasetUploadSerializer(serializers.ModelSerializer):
    class Meta:
        model = DatasetUpload
        fields = ["guid", "upload_length", "upload_metadata", "filename"]


class UploadStatusSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="The upload's id.")
    offset = serializers.IntegerField(help_text="Bytes the portal has kept.")
    length = serializers.IntegerField(help_text="Bytes in the whole file.")
    expires = serializers.DateTimeField(
        allow_null=True, help_text="When an unfinished upload is removed."
    )
    complete = serializers.BooleanField(help_text="Every byte arrived.")
    dataset_import = serializers.UUIDField(
        allow_null=True, help_text="The import it became (follow /dataset-imports/<id>/)."
    )


def upload_metadata(upload: DatasetUpload) -> dict:
    try:
        metadata = json.loads(upload.upload_metadata or "{}")
    except ValueError:
        return {}
    return metadata if isinstance(metadata, dict) else {}


class ImportWhenComplete(AbstractUploadSaveHandler):
    """drf-tus calls this when the last byte arrived: the file becomes a dataset import."""

    def handle_save(self) -> None:
        metadata = upload_metadata(self.upload)
        imported = services.dataset_import_from_file(
            user=self.upload.owner,
            name=metadata.get("name", ""),
            filename=metadata.get("filename", ""),
            path=self.upload.temporary_file_path,
            visibility=metadata.get("visibility") or "private",
            lab=services.lab_named(metadata.get("lab") or ""),
            description=metadata.get("description", ""),
        )
        self.upload.dataset_import = imported
        self.upload.temporary_file_path = None
        self.upload.save()
        self.finish()


TUS = (
    "The tus 1.0 resumable upload protocol (https://tus.io), with the creation, "
    "expiration, checksum and termination extensions. HEAD on the upload's address gives "
    "Upload-Offset, where to continue after a dropped connection."
)


@extend_schema_view(
    create=extend_schema(
        summary="Start a resumable upload of a dataset file (tus: Upload-Length, "
        "Upload-Metadata with name, filename and optionally visibility, lab, description)",
        description=TUS,
        request=None,
        responses={201: None, **error_responses(400, 401, 403, 413)},
    ),
    retrieve=extend_schema(
        summary="An upload's progress, and the import it became",
        responses={200: UploadStatusSerializer, **error_responses(401, 404)},
    ),
    # A PATCH carries application/offset+octet-stream, which is tus's, not OpenAPI's to say.
    partial_update=extend_schema(exclude=True),
    destroy=extend_schema(
        summary="Give up an upload; its bytes are removed",
        responses={204: None, **error_responses(401, 404)},
    ),
)
class DatasetUploadViewSet(UploadViewSet):
    """drf-tus's views, for the signed-in user's own uploads, into the datasets folder."""

    serializer_class = DatasetUploadSerializer
    parser_classes = [ChunkParser]
    metadata_class = KnownLengthsOnly

    @property
    def max_file_size(self) -> int:
        return int(settings.DATASET_MAX_GB * 2**30)

    def finalize_response(self, request: Request, response, *args, **kwargs):
        """drf-tus answers its refusals with a bare string: here, the API's error shape."""
        if response.status_code >= 400 and isinstance(getattr(response, "data", None), str):
            code = TUS_ERROR_CODES.get(response.status_code, "invalid")
            response.data = error_body(code, response.data)
        return super().finalize_response(request, response, *args, **kwargs)

    def options(self, request: Request, *args, **kwargs) -> Response:
        """tus's discovery, in the headers where the specification puts it (drf-tus gives
        it as the body alone)."""
        response = super().options(request, *args, **kwargs)
        for name in ("Tus-Version", "Tus-Extension", "Tus-Max-Size", "Tus-Checksum-Algorithm"):
            if name in (response.data or {}):
                response[name] = str(response.data[name])
        return response

    def create(self, request: Request, *args, **kwargs) -> Response:
        # The tus middleware read Upload-Length and Upload-Defer-Length into the request.
        length = getattr(request, constants.UPLOAD_LENGTH_FIELD_NAME, None)
        deferred = getattr(request, constants.UPLOAD_DEFER_LENGTH_FIELD_NAME, None)
        if deferred is not None or not isinstance(length, int) or length < 1:
            raise ApiError(
                "Send Upload-Length, the whole file's size in bytes (at least 1): it is checked "
                "against the size limit and your storage quota before the first byte, so an "
                "upload whose length comes later (Upload-Defer-Length) is not accepted.",
                code="invalid",
                status_code=400,
                field="Upload-Length",
            )
        return super().create(request, *args, **kwargs)

    def partial_update(self, request: Request, *args, **kwargs) -> Response:
        """A chunk, written only within the upload's declared length. The upload's row is
        locked for the whole PATCH: two PATCHes of one upload never write at once (the
        second then finds the offset moved and gets 409)."""
        with transaction.atomic():
            upload = (
                self.get_queryset()
                .select_for_update()
                .filter(guid=kwargs.get(self.lookup_field))
                .first()
            )
            offset = getattr(request, constants.UPLOAD_OFFSET_NAME, None)
            if upload is not None and offset == upload.upload_offset:
                chunk = self.get_chunk(request)
                if upload.upload_offset + len(chunk) > upload.upload_length:
                    raise ApiError(
                        f"This chunk would go past the upload's declared length "
                        f"({upload.upload_length:,} bytes): none of it was kept.",
                        code="too_large",
                        status_code=413,
                    )
            return super().partial_update(request, *args, **kwargs)

    def get_chunk(self, request: Request) -> bytes:
        return request.data.get("chunk", b"")

    def get_queryset(self):
        return DatasetUpload.objects.filter(owner=self.request.user)

    def perform_create(self, serializer) -> None:
        metadata = json.loads(serializer.validated_data.get("upload_metadata") or "{}")
        length = serializer.validated_data["upload_length"]
        try:
            services.dataset_upload_check(
                user=self.request.user,
                name=metadata.get("name", ""),
                filename=metadata.get("filename", ""),
                size=length,
                visibility=metadata.get("visibility") or "private",
                lab=services.lab_named(metadata.get("lab") or ""),
                description=metadata.get("description", ""),
            )
        except services.DatasetError as exc:
            status = 403 if exc.field == "quota" else 400
            raise ApiError(
                exc.message,
                code="quota_exceeded" if status == 403 else "invalid",
                status_code=status,
                field=exc.field,
            ) from None
        upload = serializer.save(owner=self.request.user)
        folder = storage.uploads_dir()
        folder.mkdir(parents=True, exist_ok=True)
        upload.temporary_file_path = str(folder / f"{upload.guid}.part")
        open(upload.temporary_file_path, "xb").close()  # noqa: SIM115
        upload.save()

    def validate_filename(self, filename: str) -> str:
        try:
            return services.upload_name(filename) if filename else ""
        except services.DatasetError as exc:
            raise ApiError(exc.message, code="invalid", status_code=400, field="filename") from None

    def get_success_headers(self, data) -> dict:
        return {"Location": reverse("api:dataset-upload-detail", kwargs={"guid": data["guid"]})}

    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        upload = self.get_object()
        return Response(
            UploadStatusSerializer(
                {
                    "id": upload.guid,
                    "offset": upload.upload_offset,
                    "length": upload.upload_length,
                    "expires": upload.expires,
                    "complete": upload.is_complete(),
                    "dataset_import": upload.dataset_import.public_id
                    if upload.dataset_import
                    else None,
                }
            ).data
        )
