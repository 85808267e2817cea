"""/api/v1/pool/placement/<workstation>/: the week of placement figures a workstation's kit
publishes in its machine ad (deploy/execute-node/placement-figures)."""

from __future__ import annotations

import re

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.lookups import visible_job_or_404
from plumbing.api import ApiError, ErrorSerializer

from . import selectors

WORKSTATION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


class PlacementFiguresSerializer(serializers.Serializer):
    workstation = serializers.CharField(help_text="The workstation, as the pool names it.")
    fitted_at = serializers.DateTimeField(help_text="When the forecast was learnt.")
    valid_until = serializers.DateTimeField(
        help_text="After this the kit publishes nothing: figures this old would mislead."
    )
    time_zone = serializers.CharField(help_text="The campus time zone the quarter hours are in.")
    hours = serializers.ListField(
        child=serializers.IntegerField(), help_text="The durations, in the order of each row."
    )
    quarter_hours = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField()),
        help_text="672 rows, Monday 00:00-00:15 first: for each local quarter hour of the week, "
        "the chance that the workstation, free then, stays free for each duration.",
    )


class PlacementFiguresView(APIView):
    @extend_schema(
        summary="A workstation's placement figures for the week (for its execute-node kit)",
        description="Needs a token of an account allowed to view workstation forecasts (admins, "
        "or the service account whose token the kit holds).",
        responses={
            200: PlacementFiguresSerializer,
            401: OpenApiResponse(ErrorSerializer, description="No valid token or session."),
            403: OpenApiResponse(ErrorSerializer, description="Not allowed to read forecasts."),
            404: OpenApiResponse(ErrorSerializer, description="No forecast for it yet."),
        },
    )
    def get(self, request: Request, workstation: str) -> Response:
        if not request.user.has_perm("forecasts.view_workstationforecast"):
            raise ApiError(
                "Only admins, or the account whose token the execute-node kit holds, read "
                "placement figures.", code="forbidden", status_code=403,
            )  # fmt: skip
        if not WORKSTATION_NAME.fullmatch(workstation):
            raise ApiError("That is not a workstation name.", code="invalid", status_code=400)
        figures = selectors.placement_figures(workstation)
        if figures is None:
            raise ApiError(
                f"No forecast for {workstation} yet: forecasts are learnt each night from the "
                "workstations the pool has reported.", code="not_found", status_code=404,
            )  # fmt: skip
        return Response(PlacementFiguresSerializer(figures).data)


class StartPredictionSerializer(serializers.Serializer):
    made_at = serializers.DateTimeField(help_text="When it was predicted.")
    earliest = serializers.DateTimeField(help_text="The start of the range.")
    likely = serializers.DateTimeField(help_text="The most likely start (the median).")
    latest = serializers.DateTimeField(
        allow_null=True, help_text="Null when it may not start within the horizon (2 days)."
    )
    coverage = serializers.FloatField(help_text="The chance the start falls in the range: 0.8.")
    within_horizon = serializers.FloatField(
        help_text="The share of the futures played in which it started within the horizon."
    )
    text = serializers.CharField(help_text="What the job's page says.")


class JobStartSerializer(serializers.Serializer):
    waiting = serializers.BooleanField(help_text="The job waits to start.")
    prediction = StartPredictionSerializer(
        allow_null=True, help_text="Null when it does not wait or has not been predicted yet."
    )


class JobStartView(APIView):
    @extend_schema(
        summary="When a waiting job is likely to start",
        description="The central 80 % of its possible starts, calibrated on how earlier "
        "predictions fared; refreshed every minute while the job waits (docs/placement.md).",
        responses={
            200: JobStartSerializer,
            401: OpenApiResponse(ErrorSerializer, description="No valid token or session."),
            404: OpenApiResponse(ErrorSerializer, description="No such job that you can see."),
        },
    )
    def get(self, request: Request, public_id) -> Response:
        job = visible_job_or_404(request.user, public_id)
        return Response(JobStartSerializer(selectors.job_start_payload(job)).data)
