"""/api/v1/templates/: list and publish, a version's record, run one; serve a model."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.services import JobSubmissionError
from jobs.web import JobSerializer, job_response
from labs.models import Lab
from labs.selectors import lab_by_name
from model_registry.web import CatalogueListView, catalogue_parameters
from model_registry.web import version_or_404 as model_version_or_404
from plumbing.api import ApiError, error_responses, page_responses

from ..models import TemplateVersion
from ..selectors import (
    serving_templates_for,
    template_list_visible_to,
    template_version_get_visible,
)
from ..services import TemplateError, model_serve, template_publish, template_run
from .serializers import (
    ModelServeSerializer,
    TemplatePublishSerializer,
    TemplateRunSerializer,
    TemplateVersionSerializer,
    TemplateVersionSummarySerializer,
)


def _refused(exc: TemplateError | JobSubmissionError) -> ApiError:
    return ApiError(exc.message, code="invalid", status_code=400, field=exc.field)


def template_or_404(request: Request, lab: str, name: str, number: int | None) -> TemplateVersion:
    reference = f"{lab}/{name}" + (f"@{number}" if number is not None else "")
    version = template_version_get_visible(request.user, reference)
    if version is None:
        raise ApiError(
            f"No template {reference[:200]!r} that you may use.", code="not_found", status_code=404
        )
    return version


def _lab_named(name: str) -> Lab | None:
    if not name:
        return None
    lab = lab_by_name(name)
    if lab is None:
        raise ApiError(
            f"No lab called {name[:100]!r}.", code="invalid", status_code=400, field="lab"
        )
    return lab


class TemplateListView(CatalogueListView):
    serializer_class = TemplateVersionSummarySerializer
    parser_classes = [MultiPartParser, JSONParser]
    queryset = TemplateVersion.objects.none()

    def listings(self, user, **filters) -> list:
        return template_list_visible_to(user, **filters)

    @extend_schema(
        summary="The templates you may run, each by its newest version you may see",
        parameters=catalogue_parameters("Words in the name, title or card."),
        responses=page_responses(TemplateVersionSummarySerializer, 401),
    )
    def get(self, request: Request) -> Response:
        return self.page()

    @extend_schema(
        summary="Publish a job template (a lab's leads and admins)",
        description="Multipart: the project file and the fields; resources and parameters "
        "as JSON. Everything a run needs is checked with the defaults before it is stored.",
        request={"multipart/form-data": TemplatePublishSerializer},
        responses={201: TemplateVersionSerializer, **error_responses(400, 401)},
    )
    def post(self, request: Request) -> Response:
        form = TemplatePublishSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            version = template_publish(
                user=request.user,
                lab=_lab_named(data["lab"]),
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
                resources=data["resources"],
                parameters=data["parameters"],
            )
        except TemplateError as exc:
            raise _refused(exc) from None
        return Response(TemplateVersionSerializer(version).data, status=status.HTTP_201_CREATED)


class TemplateVersionView(APIView):
    @extend_schema(
        summary="A template version: its card, parameter form, project and resources",
        description="Without a version number: the newest you may see.",
        responses={200: TemplateVersionSerializer, **error_responses(401, 404)},
    )
    def get(self, request: Request, lab: str, name: str, number: int | None = None) -> Response:
        return Response(TemplateVersionSerializer(template_or_404(request, lab, name, number)).data)


class TemplateRunView(APIView):
    @extend_schema(
        summary="Run a template with your parameter values",
        description="Each value is checked against its type and bounds and reaches the job "
        "as an argument or an environment value, and all of them as NIGHTSHIFT_PARAMETERS.",
        request=TemplateRunSerializer,
        responses={201: JobSerializer, **error_responses(400, 401, 404)},
    )
    def post(self, request: Request, lab: str, name: str, number: int | None = None) -> Response:
        version = template_or_404(request, lab, name, number)
        form = TemplateRunSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        the_lab = _lab_named(data["lab"])
        try:
            job = template_run(
                user=request.user,
                version=version,
                values=data["parameters"],
                name=data["name"],
                lab_id=the_lab.pk if the_lab else None,
            )
        except (TemplateError, JobSubmissionError) as exc:
            raise _refused(exc) from None
        return job_response(request, job, code=status.HTTP_201_CREATED)


class ModelServeView(APIView):
    @extend_schema(
        summary="Serve a model version as a live session, with a template's serve command",
        request=ModelServeSerializer,
        responses={201: JobSerializer, **error_responses(400, 401, 404)},
    )
    def post(self, request: Request, lab: str, name: str, number: int) -> Response:
        model_version = model_version_or_404(request, lab, name, number)
        form = ModelServeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        reference = form.validated_data["template"]
        if reference:
            template = template_version_get_visible(request.user, reference)
            if template is None:
                raise ApiError(
                    f"No template {reference[:200]!r} that you may use.",
                    code="not_found",
                    status_code=404,
                )
        else:
            templates = serving_templates_for(request.user, model_version)
            if not templates:
                raise ApiError(
                    "No template you may run can serve this model: a lab lead can "
                    "give one a serve command.",
                    code="invalid",
                    status_code=400,
                    field="template",
                )
            template = templates[0]
        try:
            job = model_serve(
                user=request.user, model_version=model_version, template_version=template
            )
        except (TemplateError, JobSubmissionError) as exc:
            raise _refused(exc) from None
        return job_response(request, job, code=status.HTTP_201_CREATED)
