"""The jobs API: the same services and selectors as the web pages, in JSON."""

from __future__ import annotations

import dataclasses

from django.http import FileResponse, Http404, StreamingHttpResponse
from django.urls import reverse
from django_filters import CharFilter
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs import actions, readouts, selectors, specs, staging, submission
from jobs.filters import JobListFilter
from jobs.lookups import actionable_job_or_403, own_job_or_403, visible_job_or_404
from jobs.models import Job
from jobs.software import software_choices
from plumbing.api import (
    ApiError,
    ErrorSerializer,
    Pagination,
    SubmissionThrottle,
    SubmittingListView,
    error_responses,
    page_responses,
)

from .pool_serializers import MatchSummarySerializer, PoolSerializer
from .serializers import (
    JobCloneJSONSerializer,
    JobCloneSerializer,
    JobEventSerializer,
    JobMatchSerializer,
    JobSerializer,
    JobSubmitJSONSerializer,
    JobSubmitSerializer,
    LogChunkSerializer,
    MetricsSerializer,
    OutputFileSerializer,
)

# The API's field for each service field that it spells differently.
API_FIELD_FOR = {
    "script_name": "script",
    "memory_mb": "memory_gb",
    "max_runtime_s": "max_runtime_minutes",
    "output_paths": "keep_outputs",
    "python": "environment_preset",
    "container_image": "environment_preset",
}


def submission_refused(exc: specs.JobSubmissionError) -> ApiError:
    field = API_FIELD_FOR.get(exc.field, exc.field)
    if isinstance(exc, specs.SubmissionsPaused):
        return ApiError(exc.message, code="maintenance", status_code=503)
    if isinstance(exc, specs.AccountNotApproved):
        return ApiError(exc.message, code="account_pending", status_code=403)
    if isinstance(exc, specs.QuotaRefusal):
        return ApiError(
            exc.message,
            code="quota_exceeded",
            status_code=403,
            field=None if field == "quota" else field,
        )
    return ApiError(exc.message, code="invalid", status_code=400, field=field)


def source_job_of(request: Request, data: dict) -> Job | None:
    """The earlier job of the user's whose files a submission copies (`source_job`)."""
    if not data.get("source_job") or data.get("script"):
        return None
    try:
        return selectors.job_get_for_user(request.user, data["source_job"])
    except Job.DoesNotExist:
        raise ApiError(
            "You have no job with this id.", code="invalid", status_code=400, field="source_job"
        ) from None
    except selectors.AmbiguousJobId as exc:
        raise ApiError(str(exc), code="ambiguous", status_code=400, field="source_job") from None


def submitted_name(data: dict, copy_from: Job | None = None) -> str:
    """The name given, else the uploaded file's (set by the serializer) or the source's."""
    return data.get("name") or specs.job_default_name(uploaded_name=None, source=copy_from)


def job_response(request: Request, job: Job, code: int = 200) -> Response:
    return Response(JobSerializer(job, context={"request": request}).data, status=code)


class JobPagination(Pagination):
    noun = "jobs"
    order = ", newest first"


class ApiJobFilter(JobListFilter):
    id_prefix = CharFilter(
        method="filter_id_prefix", label="The start of the job's id, as the CLI shows it."
    )

    def filter_id_prefix(self, queryset, name, value):
        cleaned = value.strip().lower()
        if not cleaned or any(c not in "0123456789abcdef-" for c in cleaned):
            return queryset.none()
        return queryset.filter(public_id__startswith=cleaned)


class JobListView(SubmittingListView):
    serializer_class = JobSerializer
    pagination_class = JobPagination
    filterset_class = ApiJobFilter
    queryset = Job.objects.none()

    def visible(self, user):
        return selectors.job_list_visible_to(user)

    @extend_schema(
        summary="List your jobs",
        responses=page_responses(JobSerializer, 400, 401),
    )
    def get(self, request: Request) -> Response:
        return self.page()

    @extend_schema(
        summary="Submit a job",
        description="Upload a script or project archive (multipart), or copy the files of an "
        "earlier job with source_job. The job is accepted and queued for the pool at once.",
        request={
            "multipart/form-data": JobSubmitSerializer,
            "application/json": JobSubmitJSONSerializer,
        },
        responses={201: JobSerializer, **error_responses(400, 401, 403, 429)},
    )
    def post(self, request: Request) -> Response:
        form = JobSubmitSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        copy_from = source_job_of(request, data)
        try:
            job = submission.job_submit(
                user=request.user,
                spec=form.to_spec(submitted_name(data, copy_from)),
                script=data.get("script"),
                copy_from=copy_from,
                requirements=data.get("requirements"),
            )
        except specs.JobSubmissionError as exc:
            raise submission_refused(exc) from None
        return job_response(request, job, status.HTTP_201_CREATED)


class JobDetailView(APIView):
    @extend_schema(summary="One job", responses={200: JobSerializer, **error_responses(401, 404)})
    def get(self, request: Request, public_id) -> Response:
        job = visible_job_or_404(request.user, public_id)
        return job_response(request, job)


def _action_view(service, summary: str):
    class JobActionView(APIView):
        @extend_schema(
            summary=summary,
            request=None,
            responses={
                200: JobSerializer,
                **error_responses(401, 404),
                403: OpenApiResponse(ErrorSerializer, description="Not your job to act on."),
                409: OpenApiResponse(ErrorSerializer, description="Not possible now."),
            },
        )
        def post(self, request: Request, public_id) -> Response:
            job = actionable_job_or_403(request.user, public_id)
            try:
                job = service(job=job, user=request.user)
            except specs.JobActionError as exc:
                raise ApiError(str(exc), code="conflict", status_code=409) from None
            return job_response(request, job)

    action = service.__name__.removeprefix("job_").title()
    JobActionView.__name__ = JobActionView.__qualname__ = f"Job{action}View"
    return JobActionView


JobCancelView = _action_view(actions.job_cancel, "Cancel a job")
JobHoldView = _action_view(actions.job_hold, "Hold a job until you release it")
JobReleaseView = _action_view(actions.job_release, "Release a held job")


class JobRerunView(APIView):
    throttle_classes = [SubmissionThrottle]

    @extend_schema(
        summary="Run a job again with the same files and settings",
        request=None,
        responses={201: JobSerializer, **error_responses(400, 401, 403, 404, 429)},
    )
    def post(self, request: Request, public_id) -> Response:
        job = own_job_or_403(request.user, public_id)
        try:
            new_job = actions.job_rerun(job=job, user=request.user)
        except specs.JobSubmissionError as exc:
            raise submission_refused(exc) from None
        return job_response(request, new_job, status.HTTP_201_CREATED)


class JobCloneView(APIView):
    parser_classes = [MultiPartParser, JSONParser]
    throttle_classes = [SubmissionThrottle]

    @extend_schema(
        summary="Submit a copy of a job, with some fields changed",
        description="Fields left out keep the original's values. A new script or archive "
        "replaces the original's files.",
        request={
            "multipart/form-data": JobCloneSerializer,
            "application/json": JobCloneJSONSerializer,
        },
        responses={201: JobSerializer, **error_responses(400, 401, 403, 404, 429)},
    )
    def post(self, request: Request, public_id) -> Response:
        job = own_job_or_403(request.user, public_id)
        form = JobCloneSerializer(data=request.data, partial=True)
        form.is_valid(raise_exception=True)
        spec = dataclasses.replace(specs.job_spec_of(job), **form.spec_changes())
        script = form.validated_data.get("script")
        try:
            new_job = submission.job_submit(
                user=request.user,
                spec=spec,
                script=script,
                copy_from=None if script else job,
            )
        except specs.JobSubmissionError as exc:
            raise submission_refused(exc) from None
        return job_response(request, new_job, status.HTTP_201_CREATED)


class JobEventsView(APIView):
    @extend_schema(
        summary="A job's timeline",
        responses={200: JobEventSerializer(many=True), **error_responses(401, 404)},
    )
    def get(self, request: Request, public_id) -> Response:
        job = visible_job_or_404(request.user, public_id)
        events = job.events.select_related("actor")
        return Response(JobEventSerializer(events, many=True).data)


class JobLogView(APIView):
    @extend_schema(
        summary="Read a job's log from a byte offset",
        description="Returns at most 256 KiB from `offset`. To follow a running job, pass the "
        "returned `offset` back until `is_final` is true and `offset` equals `size`. A "
        "negative offset reads the last 64 KiB.",
        parameters=[
            OpenApiParameter(
                "stream", str, OpenApiParameter.PATH, enum=["stdout", "stderr", "install"]
            ),
            OpenApiParameter("offset", int, description="Byte offset to read from (default 0)."),
        ],
        responses={200: LogChunkSerializer, **error_responses(400, 401, 404)},
    )
    def get(self, request: Request, public_id, stream: str) -> Response:
        job = visible_job_or_404(request.user, public_id)
        path = staging.job_logs_for(job).get(stream)
        if path is None:
            raise Http404("Logs are stdout, stderr and, for jobs that install packages, install.")
        raw_offset = request.query_params.get("offset", "0")
        try:
            offset = int(raw_offset)
        except ValueError:
            raise ApiError(
                "offset must be a whole number of bytes.",
                code="invalid",
                status_code=400,
                field="offset",
            ) from None
        chunk = selectors.job_log_chunk(job.directory, path, offset)
        return Response(
            {
                "stream": stream,
                "text": chunk.text,
                "start": chunk.start,
                "offset": chunk.offset,
                "size": chunk.size,
                "is_final": job.is_final,
            }
        )


class JobOutputsView(APIView):
    @extend_schema(
        summary="List a job's output files",
        responses={200: OutputFileSerializer(many=True), **error_responses(401, 404)},
    )
    def get(self, request: Request, public_id) -> Response:
        job = visible_job_or_404(request.user, public_id)
        files = [
            {
                "path": output.path,
                "size": output.size,
                "url": request.build_absolute_uri(
                    reverse("api:job-output", args=[job.public_id, output.path])
                ),
            }
            for output in selectors.job_output_files(job)
        ]
        return Response(files)


BINARY = {(200, "application/octet-stream"): OpenApiTypes.BINARY}


class JobOutputFileView(APIView):
    @extend_schema(
        summary="Download one output file",
        parameters=[
            OpenApiParameter(
                "path", str, OpenApiParameter.PATH, description="As listed, e.g. outputs/model.pt."
            )
        ],
        responses={**BINARY, **error_responses(401, 404)},
    )
    def get(self, request: Request, public_id, path: str) -> FileResponse:
        return readouts.output_file_response(visible_job_or_404(request.user, public_id), path)


class JobOutputsZipView(APIView):
    @extend_schema(
        summary="Download every output file as one zip",
        responses={(200, "application/zip"): OpenApiTypes.BINARY, **error_responses(401, 404)},
    )
    def get(self, request: Request, public_id) -> StreamingHttpResponse:
        return readouts.outputs_zip_response(visible_job_or_404(request.user, public_id))


class JobMetricsView(APIView):
    @extend_schema(
        summary="A job's logged metrics (loss, accuracy, ...)",
        parameters=[
            OpenApiParameter(
                "limit",
                int,
                description="At most this many rows, "
                "evenly downsampled (default 1000, at most 100000).",
            )
        ],
        responses={200: MetricsSerializer, **error_responses(400, 401, 404)},
    )
    def get(self, request: Request, public_id) -> Response:
        job = visible_job_or_404(request.user, public_id)
        try:
            limit = int(request.query_params.get("limit", 1000))
        except ValueError:
            limit = -1
        if not 1 <= limit <= 100_000:
            raise ApiError(
                "limit must be 1 to 100000.", code="invalid", status_code=400, field="limit"
            )
        return Response(readouts.metrics_payload(job, limit=limit))


class PoolView(APIView):
    @extend_schema(
        summary="The pool's workstations, their GPUs, and the software environments",
        responses={200: PoolSerializer, **error_responses(401)},
    )
    def get(self, request: Request) -> Response:
        overview = selectors.pool_overview()
        fields = {
            field.name: getattr(overview, field.name) for field in dataclasses.fields(overview)
        }
        fields["environments"] = software_choices(request.user)
        return Response(PoolSerializer(fields).data)


class MatchView(APIView):
    @extend_schema(
        summary="What in the pool could run a proposed request, and what is free now",
        description="The same analysis as the live count beside the web form's GPU fields.",
        request=JobMatchSerializer,
        responses={
            200: MatchSummarySerializer,
            **error_responses(400, 401),
            503: OpenApiResponse(ErrorSerializer, description="The pool did not answer."),
        },
    )
    def post(self, request: Request) -> Response:
        form = JobMatchSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            summary = submission.job_match_summary(user=request.user, spec=form.to_spec("match"))
        except specs.JobSubmissionError as exc:
            raise submission_refused(exc) from None
        if summary is None:
            raise ApiError(
                "The pool is not answering; try again shortly.",
                code="pool_unavailable",
                status_code=503,
            )
        return Response({**dataclasses.asdict(summary), "can_ever_run": summary.can_ever_run})
