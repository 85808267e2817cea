"""drf-tus's header parsing, as the tus 1.0 specification reads: an Upload-Metadata key may
come without a value (tus-js-client and tuspy send empty fields so), and a malformed tus
header is the client's error (400), not the portal's (500)."""

from __future__ import annotations

import base64
import binascii

from django.http import JsonResponse
from rest_framework_tus import constants
from rest_framework_tus.middleware import TusMiddleware

from plumbing.api import error_body


class TusHeadersMiddleware(TusMiddleware):
    def process_request(self, request):
        try:
            return super().process_request(request)
        except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
            return JsonResponse(
                error_body("invalid", f"A tus header of this request is malformed ({exc})."),
                status=400,
            )

    @classmethod
    def parse_upload_metadata(cls, request) -> None:
        header = cls.get_header(request, "Upload-Metadata", None)
        if header is None:
            return
        metadata = {}
        for pair in header.split(","):
            key, _, value = pair.strip().partition(" ")
            if key:
                metadata[key] = base64.b64decode(value.encode("ascii"), validate=True).decode()
        setattr(request, constants.UPLOAD_METADATA_FIELD_NAME, metadata)
