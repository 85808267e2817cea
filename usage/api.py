"""/api/v1/jobs/<id>/usage/: what a job used, sample by sample, and its summary."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.web import visible_job_or_404
from plumbing.api import ErrorSerializer

from . import selectors


class UsageSerializer(serializers.Serializer):
    is_final = serializers.BooleanField(help_text="The job has ended; no more samples come.")
    requested = serializers.DictField(help_text="cpus, memory_mb, disk_mb, gpus asked for.")
    runs = serializers.ListField(
        child=serializers.DictField(),
        help_text="Each run (started_at, workstation) with its samples: time, cpus (cores "
        "busy on average), memory_mb, memory_peak_mb, disk_mb, gpu_utilization (0-1 per GPU, "
        "since the sample before), gpus_busy (HTCondor's GPUs' worth of work), gpus_active, "
        "gpu_memory_mb; null where not measured.",
    )
    summary = serializers.DictField(
        allow_null=True,
        help_text="Once the job has ended: peaks, averages and GPU-hours; "
        "gpu_energy_kwh (its GPUs' energy above their idle draw, from the job helper's power "
        "samples; null where none came back), co2e_kg (at the site's grid intensity; null "
        "where it set none), energy_simulated (the personal pool's simulated GPUs: the "
        "simulator's figures) and energy_idle_estimated (idle draw taken as the lowest the "
        "job's samples saw).",
    )
    advice = serializers.ListField(
        child=serializers.DictField(),
        help_text="Plain advice (kind, text) and the request change it suggests (adjust).",
    )
    clone_url = serializers.CharField(help_text="The new-job form with the advice applied.")


class JobUsageView(APIView):
    @extend_schema(
        summary="What a job used: CPU, memory, disk and GPUs, per run, and advice",
        responses={
            200: UsageSerializer,
            401: OpenApiResponse(ErrorSerializer, description="No valid token or session."),
            404: OpenApiResponse(ErrorSerializer, description="No such job that you can see."),
        },
    )
    def get(self, request: Request, public_id) -> Response:
        job = visible_job_or_404(request.user, public_id)
        return Response(selectors.job_usage_payload(job))
