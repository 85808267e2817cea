"""/api/v1/environments/: list, create, show, add versions to, test-build and delete."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.services import JobSubmissionError
from jobs.web import submission_refused
from labs.selectors import lab_by_name
from plumbing.api import ApiError, VisibleListView, error_responses, page_responses
from plumbing.names import named_in_address

from .. import builds, services
from ..models import Environment
from ..selectors import environment_get_usable, environment_list_usable_by, environment_may_change
from .serializers import (
    BuildReportSerializer,
    EnvironmentCreateSerializer,
    EnvironmentSerializer,
    EnvironmentSummarySerializer,
    EnvironmentVersionSerializer,
    VersionInputSerializer,
)


def refused(exc: services.EnvironmentError) -> ApiError:
    message = exc.message + (f"\n\n{exc.detail}" if exc.detail else "")
    return ApiError(message, code="invalid", status_code=400, field=exc.field)


def environment_or_404(request: Request, name: str) -> Environment:
    """The environment a URL names; ?owner=USERNAME (or site) says whose, where several
    owners offer the name."""
    return named_in_address(
        "environment",
        lambda reference: environment_get_usable(request.user, reference),
        name,
        request.query_params.get("owner"),
    )


def changeable_or_403(request: Request, name: str) -> Environment:
    environment = environment_or_404(request, name)
    if not environment_may_change(request.user, environment):
        raise ApiError(
            "Only its owner (or an administrator) may change it.", code="forbidden", status_code=403
        )
    return environment


class EnvironmentListView(VisibleListView):
    serializer_class = EnvironmentSummarySerializer
    queryset = Environment.objects.none()

    def visible(self, user):
        return environment_list_usable_by(user).prefetch_related("versions")

    @extend_schema(
        summary="List the environments you may use: yours, your labs' and the site's",
        responses=page_responses(EnvironmentSummarySerializer, 401),
    )
    def get(self, request: Request) -> Response:
        return self.page()

    @extend_schema(
        summary="Create an environment with its first version",
        description="Its requirements are resolved now, on the portal, into a lock with exact "
        "versions and hashes; a requirement that cannot be resolved is refused with the "
        "reason. Only package requirements are accepted.",
        request=EnvironmentCreateSerializer,
        responses={201: EnvironmentSerializer, **error_responses(400, 401)},
    )
    def post(self, request: Request) -> Response:
        form = EnvironmentCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = dict(form.validated_data)
        lab_name = data.pop("lab", "")
        lab = lab_by_name(lab_name)
        try:
            environment = services.environment_create(user=request.user, lab=lab, **data)
        except services.EnvironmentError as exc:
            raise refused(exc) from None
        return Response(EnvironmentSerializer(environment).data, status=status.HTTP_201_CREATED)


class EnvironmentDetailView(APIView):
    @extend_schema(
        summary="An environment with every version and its lock",
        responses={200: EnvironmentSerializer, **error_responses(401, 404)},
    )
    def get(self, request: Request, name: str) -> Response:
        return Response(EnvironmentSerializer(environment_or_404(request, name)).data)

    @extend_schema(
        summary="Delete an environment you own",
        description="Jobs that ran with it keep their record of the version and its lock.",
        responses={204: None, **error_responses(401, 403, 404)},
    )
    def delete(self, request: Request, name: str) -> Response:
        services.environment_delete(user=request.user, environment=changeable_or_403(request, name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class EnvironmentVersionsView(APIView):
    @extend_schema(
        summary="Add a version (versions never change)",
        request=VersionInputSerializer,
        responses={201: EnvironmentVersionSerializer, **error_responses(400, 401, 403, 404)},
    )
    def post(self, request: Request, name: str) -> Response:
        environment = changeable_or_403(request, name)
        form = VersionInputSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            version = services.environment_version_add(
                user=request.user, environment=environment, **form.validated_data
            )
        except services.EnvironmentError as exc:
            raise refused(exc) from None
        return Response(EnvironmentVersionSerializer(version).data, status=201)


class EnvironmentLockView(APIView):
    @extend_schema(
        summary="A version's lock, as a requirements file with hashes",
        responses={(200, "text/plain"): OpenApiResponse(str), **error_responses(401, 404)},
    )
    def get(self, request: Request, name: str, number: int) -> HttpResponse:
        version = environment_or_404(request, name).versions.filter(number=number).first()
        if version is None or not version.lock:
            raise ApiError("That version has no lock.", code="not_found", status_code=404)
        response = HttpResponse(version.lock, content_type="text/plain; charset=utf-8")
        filename = f"{version.environment.pk}-{version.number}-requirements.lock.txt"
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response


class EnvironmentBuildView(APIView):
    def version(self, request: Request, name: str, number: int):
        version = environment_or_404(request, name).versions.filter(number=number).first()
        if version is None:
            raise ApiError("No such version.", code="not_found", status_code=404)
        return version

    @extend_schema(
        summary="The latest test build of a version",
        responses={200: BuildReportSerializer, **error_responses(401, 404)},
    )
    def get(self, request: Request, name: str, number: int) -> Response:
        build = builds.latest_build(self.version(request, name, number))
        if build is None:
            raise ApiError(
                "This version has not been test-built.", code="not_found", status_code=404
            )
        return Response(BuildReportSerializer(builds.build_report(build)).data)

    @extend_schema(
        summary="Test-build a version: install it on a workstation and import its packages",
        description="A small job of yours; its page shows the install log live. A failure is "
        "explained in plain words (no matching distribution, the wrong Python, a package "
        "that needs a compiler, an import that fails).",
        request=None,
        responses={202: BuildReportSerializer, **error_responses(400, 401, 403, 404)},
    )
    def post(self, request: Request, name: str, number: int) -> Response:
        version = self.version(request, name, number)
        try:
            build = builds.environment_test_build(user=request.user, version=version)
        except JobSubmissionError as exc:
            raise submission_refused(exc) from None
        return Response(BuildReportSerializer(builds.build_report(build)).data, status=202)
