"""The experiments API: sweeps, matrices and studies, with the jobs API's conventions."""

from __future__ import annotations

from django.db.models import Count
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.services import JobActionError, JobSubmissionError
from jobs.web import source_job_of, submission_refused, submitted_name
from plumbing.api import (
    ApiError,
    ErrorSerializer,
    Pagination,
    SubmissionThrottle,
    SubmittingListView,
    error_responses,
    page_responses,
)

from .. import matrices, readouts, selectors, studies, sweeps
from ..lookups import actionable_sweep_or_403, visible_sweep_or_404
from ..models import Sweep
from .serializers import (
    MatrixSubmitSerializer,
    StudySubmitSerializer,
    SweepSerializer,
    SweepSubmitJSONSerializer,
    SweepSubmitSerializer,
    SweepSummarySerializer,
)


class SweepPagination(Pagination):
    noun = "sweeps"
    order = ", newest first"


class SweepListView(SubmittingListView):
    serializer_class = SweepSummarySerializer
    pagination_class = SweepPagination
    queryset = Sweep.objects.none()

    def visible(self, user):
        return selectors.sweep_list_visible_to(user).annotate(run_count=Count("runs"))

    @extend_schema(
        summary="List your sweeps",
        responses=page_responses(SweepSummarySerializer, 401),
    )
    def get(self, request: Request) -> Response:
        return self.page()

    @extend_schema(
        summary="Submit a sweep",
        description="Many runs of one job with different parameters, submitted to HTCondor "
        "as one cluster. Every run is checked, and the quota for all of them together, "
        "before any is accepted. Its runs are jobs: the jobs endpoints show each.",
        request={
            "multipart/form-data": SweepSubmitSerializer,
            "application/json": SweepSubmitJSONSerializer,
        },
        responses={201: SweepSerializer, **error_responses(400, 401, 403, 429)},
    )
    def post(self, request: Request) -> Response:
        form = SweepSubmitSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        copy_from = source_job_of(request, data)
        try:
            sweep = sweeps.sweep_submit(
                user=request.user,
                spec=form.to_spec(submitted_name(data, copy_from)),
                plan=sweeps.SweepPlan.from_json(data["parameters"]),
                script=data.get("script"),
                copy_from=copy_from,
                requirements=data.get("requirements"),
            )
        except JobSubmissionError as exc:
            raise submission_refused(exc) from None
        return sweep_response(request, sweep, status.HTTP_201_CREATED)


class MatrixSubmitView(APIView):
    parser_classes = [MultiPartParser]
    throttle_classes = [SubmissionThrottle]

    @extend_schema(
        summary="Submit an evaluation matrix",
        description="Every system (its own script or project and entry command) run on every "
        "dataset (a path, or an uploaded file or archive), as one sweep submitted to HTCondor "
        "as one cluster. The sweep's page compares them in a systems-by-datasets table.",
        request={"multipart/form-data": MatrixSubmitSerializer},
        responses={201: SweepSerializer, **error_responses(400, 401, 403, 429)},
    )
    def post(self, request: Request) -> Response:
        form = MatrixSubmitSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            sweep = matrices.matrix_submit(
                user=request.user,
                spec=form.to_spec(data["name"]),
                systems=[
                    matrices.MatrixSystem(
                        s["name"], s["upload"], s.get("entry_command"), s.get("model")
                    )
                    for s in data["systems"]
                ],
                datasets=[
                    matrices.MatrixDataset(d["name"], d.get("path"), d["upload"])
                    for d in data["datasets"]
                ],
            )
        except JobSubmissionError as exc:
            raise submission_refused(exc) from None
        return sweep_response(request, sweep, status.HTTP_201_CREATED)


class StudySubmitView(APIView):
    parser_classes = [MultiPartParser, JSONParser]
    throttle_classes = [SubmissionThrottle]

    @extend_schema(
        summary="Start a hyperparameter study",
        description="An Optuna study whose trials are jobs: up to `parallel` at once, each with "
        "the values Optuna asks for, until `max_trials`, the GPU-hour budget or the deadline. "
        "Its runs and their results read like a sweep's.",
        request={"multipart/form-data": StudySubmitSerializer},
        responses={201: SweepSerializer, **error_responses(400, 401, 403, 429)},
    )
    def post(self, request: Request) -> Response:
        form = StudySubmitSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            sweep = studies.study_submit(
                user=request.user,
                spec=form.to_spec(submitted_name(data)),
                plan=studies.StudyPlan.from_json(data["study"]),
                script=data.get("script"),
                requirements=data.get("requirements"),
            )
        except JobSubmissionError as exc:
            raise submission_refused(exc) from None
        return sweep_response(request, sweep, status.HTTP_201_CREATED)


def sweep_response(request: Request, sweep: Sweep, code: int = 200) -> Response:
    sweep.ordered_runs = list(selectors.sweep_run_summaries(sweep))
    sweep.run_count = len(sweep.ordered_runs)
    return Response(SweepSerializer(sweep, context={"request": request}).data, status=code)


class SweepDetailView(APIView):
    @extend_schema(
        summary="One sweep, with its runs",
        responses={200: SweepSerializer, **error_responses(401, 404)},
    )
    def get(self, request: Request, public_id) -> Response:
        return sweep_response(request, visible_sweep_or_404(request.user, public_id))


RESULT_PARAMETERS = [
    OpenApiParameter(
        "metric",
        str,
        description="The metric compared (default: the first one logged, or a study's objective).",
    ),
    OpenApiParameter("goal", str, enum=["min", "max"], description="Which is best."),
    OpenApiParameter("state", str, description="Only runs in this state."),
    OpenApiParameter(
        "sort",
        str,
        description="index, state, final, best, gpu_hours or "
        "p.<parameter>; a leading - for descending.",
    ),
]


def _comparison(request: Request, sweep: Sweep) -> readouts.SweepComparison:
    return readouts.sweep_comparison(
        sweep,
        metric=request.query_params.get("metric"),
        goal=request.query_params.get("goal"),
        state=request.query_params.get("state"),
        sort=request.query_params.get("sort", "index"),
    )


class SweepResultsView(APIView):
    @extend_schema(
        summary="A sweep's runs compared by a metric",
        parameters=RESULT_PARAMETERS,
        responses={200: OpenApiTypes.OBJECT, **error_responses(401, 404)},
    )
    def get(self, request: Request, public_id) -> Response:
        sweep = visible_sweep_or_404(request.user, public_id)
        return Response(readouts.sweep_results_payload(_comparison(request, sweep)))


class SweepResultsCsvView(APIView):
    @extend_schema(
        summary="A sweep's runs compared by a metric, as CSV",
        parameters=RESULT_PARAMETERS,
        responses={(200, "text/csv"): OpenApiTypes.STR, **error_responses(401, 404)},
    )
    def get(self, request: Request, public_id) -> HttpResponse:
        sweep = visible_sweep_or_404(request.user, public_id)
        response = HttpResponse(
            readouts.sweep_results_csv(_comparison(request, sweep)), content_type="text/csv"
        )
        response["Content-Disposition"] = f'attachment; filename="sweep-{sweep.public_id}.csv"'
        return response


class SweepCancelView(APIView):
    @extend_schema(
        summary="Cancel every run of a sweep that has not ended",
        request=None,
        responses={
            200: SweepSerializer,
            **error_responses(401, 404),
            403: OpenApiResponse(ErrorSerializer, description="Not your sweep."),
            409: OpenApiResponse(ErrorSerializer, description="Nothing left to cancel."),
        },
    )
    def post(self, request: Request, public_id) -> Response:
        sweep = actionable_sweep_or_403(request.user, public_id)
        try:
            if sweep.is_study:
                studies.study_cancel(sweep=sweep, user=request.user)
            else:
                sweeps.sweep_cancel(sweep=sweep, user=request.user)
        except JobActionError as exc:
            raise ApiError(str(exc), code="conflict", status_code=409) from None
        return sweep_response(request, sweep)
