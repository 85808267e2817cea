"""What every API endpoint shares: one error shape, rate limits, and the 404 for unknown URLs.

Every failure answers `{"error": {"code": ..., "message": ..., "fields": {...}}}`:
`code` is machine-readable, `message` is for a person, and `fields` (on validation
errors only) maps each input to its problems.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle
from rest_framework.views import exception_handler as drf_exception_handler

logger = logging.getLogger(__name__)


class ApiError(exceptions.APIException):
    """An error a service raised, with our own code and an optional field."""

    def __init__(self, message: str, *, code: str, status_code: int, field: str | None = None):
        super().__init__(message, code)
        self.status_code = status_code
        self.error_code = code
        self.field = field


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    error = {"code": code, "message": message}
    if fields:
        error["fields"] = fields
    return {"error": error}


def _flatten(detail, path: str = "") -> dict[str, list[str]]:
    """DRF's nested validation detail as {"field": [messages]}, with dotted paths."""
    if isinstance(detail, dict):
        fields: dict[str, list[str]] = {}
        for key, value in detail.items():
            fields.update(_flatten(value, f"{path}.{key}" if path else str(key)))
        return fields
    if isinstance(detail, list) and any(isinstance(item, dict | list) for item in detail):
        fields = {}
        for index, item in enumerate(detail):
            fields.update(_flatten(item, f"{path}.{index}" if path else str(index)))
        return fields
    items = detail if isinstance(detail, list) else [detail]
    return {path or "non_field_errors": [str(item) for item in items]}


_CODES = {
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "throttled",
    exceptions.ParseError: "malformed_request",
}


def exception_handler(exc, context) -> Response:
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, RequestDataTooBig):
        exc = exceptions.ParseError(
            "The request body is too large; upload big files as the script field."
        )
    elif isinstance(exc, SuspiciousOperation):
        exc = exceptions.ParseError(str(exc) or "The request could not be read.")
    if isinstance(exc, ApiError):
        fields = {exc.field: [str(exc.detail)]} if exc.field else None
        return Response(error_body(exc.error_code, str(exc.detail), fields), exc.status_code)
    response = drf_exception_handler(exc, context)
    if response is None:
        # An unexpected failure still answers in the API's shape; the traceback goes to the log.
        logger.exception("API request failed", exc_info=exc)
        return Response(
            error_body("server_error", "Something went wrong on the server; it has been logged."),
            status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        first = next(iter(fields.items()), ("", ["Invalid input."]))
        where = "" if first[0] in ("non_field_errors", "") else f"{first[0]}: "
        response.data = error_body("invalid", f"{where}{first[1][0]}", fields)
        return response
    code = _CODES.get(type(exc), getattr(exc, "default_code", "error"))
    message = str(exc.detail) if not isinstance(exc.detail, dict | list) else str(exc)
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        response.data = error_body(code, f"Too many requests; try again in {exc.wait:.0f} s.")
    else:
        response.data = error_body(code, message)
    return response


class ScopedUserThrottle(UserRateThrottle):
    """A per-user (or per-address, when anonymous) limit, read from settings at each request."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        super().__init__()

    def get_rate(self) -> str:
        return settings.API_THROTTLE_RATES[self.scope]


class SubmissionThrottle(ScopedUserThrottle):
    def __init__(self) -> None:
        super().__init__("submissions")


class TokenThrottle(ScopedUserThrottle):
    def __init__(self) -> None:
        super().__init__("tokens")


@csrf_exempt  # it changes nothing; a POST to a wrong URL is a 404, not a CSRF failure
def api_not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    return JsonResponse(
        error_body("not_found", f"There is no API endpoint at /{request.path.lstrip('/')}."),
        status=404,
    )


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Machine-readable, e.g. not_found, invalid, throttled.")
    message = serializers.CharField(help_text="What went wrong, for a person to read.")
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="On validation errors: each input's problems, by field name.",
    )


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer(help_text="What went wrong.")


ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Invalid input; `fields` says where."),
    403: OpenApiResponse(
        ErrorSerializer,
        description="Over a quota limit; the message says "
        "which, the usage, and when capacity frees up.",
    ),
    401: OpenApiResponse(ErrorSerializer, description="No valid token or session."),
    404: OpenApiResponse(ErrorSerializer, description="Not found, or not yours to see."),
}


def error_responses(*codes: int) -> dict:
    """The OpenAPI description of each error status an endpoint may answer."""
    return {code: ERRORS.get(code) or OpenApiResponse(ErrorSerializer) for code in codes}


def page_responses(serializer: type[serializers.Serializer], *codes: int) -> dict:
    """The OpenAPI description of a paged list's answers: a page of `serializer`, the errors
    in `codes`, and 404 for a page past the end."""
    return {
        200: serializer(many=True),
        **error_responses(*codes),
        404: OpenApiResponse(ErrorSerializer, description="A page past the end."),
    }


class Pagination(PageNumberPagination):
    """Pages of 25 (page_size up to 200), each field described for the API's document."""

    page_size = 25
    page_size_query_param = "page_size"
    max_page_size = 200
    # What the pages hold, and in which order, for the document.
    noun = "items"
    order = ""

    def get_paginated_response_schema(self, schema: dict) -> dict:
        described = super().get_paginated_response_schema(schema)
        properties = described["properties"]
        properties["count"]["description"] = f"{self.noun.capitalize()} that match, on every page."
        properties["next"]["description"] = "The next page; null on the last."
        properties["previous"]["description"] = "The previous page; null on the first."
        properties["results"]["description"] = f"This page's {self.noun}{self.order}."
        return described


# A list of what the requesting user may see, a page at a time: `visible(user)` says what,
# and the empty `queryset` stands in for it in the API's document. (A comment, not a
# docstring: the API's document would show a docstring as every subclass's description.)
class VisibleListView(GenericAPIView):
    pagination_class = Pagination

    def visible(self, user):
        raise NotImplementedError

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return self.queryset
        return self.visible(self.request.user)

    def page(self) -> Response:
        """One page of it (filtered where the view has filters), serialised."""
        items = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(items, many=True).data)


# A list that also takes submissions (jobs, sweeps): a script or project as a multipart upload,
# or JSON; only the submissions count against the user's submission rate.
class SubmittingListView(VisibleListView):
    parser_classes = [MultiPartParser, JSONParser]

    def get_throttles(self):
        return [SubmissionThrottle()] if self.request.method == "POST" else []
