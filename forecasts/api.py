"""/api/v1/pool/placement/<workstation>/ and /api/v1/pool/reservations/<workstation>/: what a
workstation's kit publishes in its machine ad (deploy/execute-node/placement-figures); a
waiting job's predicted start; and the labs' reservations (/api/v1/reservations/)."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.web import visible_job_or_404
from labs.models import Lab
from labs.selectors import labs_managed_by
from plumbing.api import ApiError, ErrorSerializer
from plumbing.quiet import expect_answer

from . import reservations, selectors
from .authentication import KitEndpoint, check_kit_request, kit_refusals
from .models import Reservation


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
    mean_free_s = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="672 values, one per quarter hour: the expected seconds until the owner "
        "comes back, for the workstation free then (a job's checkpoint interval follows it).",
    )
    possible_return_s = serializers.ListField(
        child=serializers.IntegerField(allow_null=True),
        help_text="672 values: seconds until the owner may be back (a chance of 1 in 20), or "
        "null when not within a day (a job saves just before it).",
    )


class PlacementFiguresView(KitEndpoint):
    @extend_schema(
        summary="A workstation's placement figures for the week (for its execute-node kit)",
        description="Needs the workstation's kit credential (Bearer nsk_..., made by manage.py "
        "kit_token for the workstations it names) or an admin's token.",
        responses={
            200: PlacementFiguresSerializer,
            **kit_refusals("Not allowed to read forecasts."),
            404: OpenApiResponse(ErrorSerializer, description="No forecast for it yet."),
        },
    )
    def get(self, request: Request, workstation: str) -> Response:
        check_kit_request(request, workstation, what="placement figures")
        figures = selectors.placement_figures(workstation)
        if figures is None:
            # The kit asks every 30 s from the start, before the first night's forecast:
            # an answer it expects, not one to warn about on the portal's console.
            expect_answer(request)
            raise ApiError(
                f"No forecast for {workstation} yet: forecasts are learnt each night from the "
                "workstations the pool has reported.",
                code="not_found",
                status_code=404,
            )
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
    deadline = serializers.CharField(
        help_text="With a time to finish by: how likely that is (empty without one)."
    )
    interruptions = serializers.CharField(
        help_text="With a maximum runtime: owners' expected interruptions of the run and the "
        "checkpoint interval suggested (empty without one)."
    )


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


class KitReservationSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", help_text="The reservation's id.")
    lab = serializers.CharField(
        source="lab.name", help_text="The lab it holds the workstation for."
    )
    accounting_group = serializers.CharField(
        source="lab.accounting_group", help_text="The HTCondor accounting group its jobs carry."
    )
    starts_at = serializers.DateTimeField(help_text="When the hold begins.")
    ends_at = serializers.DateTimeField(help_text="When it ends.")


class KitReservationsSerializer(serializers.Serializer):
    workstation = serializers.CharField(help_text="The workstation, as the pool names it.")
    reservations = KitReservationSerializer(
        many=True, help_text="Its windows on now or starting in the next 14 days, soonest first."
    )


class KitReservationsView(KitEndpoint):
    @extend_schema(
        summary="A workstation's reservation windows (for its execute-node kit)",
        description="Needs the workstation's kit credential (Bearer nsk_..., made by manage.py "
        "kit_token for the workstations it names) or an admin's token. A workstation nobody "
        "has reserved gets an empty list.",
        responses={
            200: KitReservationsSerializer,
            **kit_refusals("Not allowed to read forecasts."),
        },
    )
    def get(self, request: Request, workstation: str) -> Response:
        check_kit_request(request, workstation, what="a workstation's reservations")
        found = reservations.reservations_for_kit(workstation)
        payload = {"workstation": workstation, "reservations": found}
        return Response(KitReservationsSerializer(payload).data)


class ReservationSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", read_only=True, help_text="Its id.")
    lab = serializers.IntegerField(source="lab_id", help_text="The lab it is for (its id).")
    lab_name = serializers.CharField(
        source="lab.name", read_only=True, help_text="That lab's name."
    )
    purpose = serializers.CharField(max_length=200, help_text="What it is for: a course, a demo.")
    starts_at = serializers.DateTimeField(help_text="When the hold begins.")
    ends_at = serializers.DateTimeField(help_text="When it ends.")
    gpus_asked = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        source="gpus",
        help_text="Ask for this many GPUs (whole workstations are held); or name workstations.",
    )
    workstations = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=200,
        help_text="The workstations held (on create: the ones to hold, instead of a number).",
    )
    gpus = serializers.IntegerField(read_only=True, help_text="The GPUs of the workstations held.")
    state = serializers.SerializerMethodField(help_text="upcoming, on, ended or cancelled.")
    created_by = serializers.CharField(
        source="created_by.get_username", read_only=True, default="", help_text="Who made it."
    )

    def get_state(self, reservation) -> str:
        return reservation.state_at(timezone.now())


class ReservationListView(APIView):
    @extend_schema(
        summary="The reservations on now or to come",
        responses={
            200: ReservationSerializer(many=True),
            401: OpenApiResponse(ErrorSerializer, description="No valid token or session."),
        },
    )
    def get(self, request: Request) -> Response:
        live = reservations.reservations_live().select_related("created_by")
        return Response(ReservationSerializer(live, many=True).data)

    @extend_schema(
        summary="Reserve workstations for a lab (its leads and admins)",
        request=ReservationSerializer,
        responses={
            201: ReservationSerializer,
            400: OpenApiResponse(ErrorSerializer, description="Refused, with what to change."),
            401: OpenApiResponse(ErrorSerializer, description="No valid token or session."),
            403: OpenApiResponse(ErrorSerializer, description="Not a lead of that lab."),
        },
    )
    def post(self, request: Request) -> Response:
        given = ReservationSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        lab = Lab.objects.filter(pk=data["lab_id"]).first()
        if lab is None or not labs_managed_by(request.user).filter(pk=lab.pk).exists():
            raise ApiError(
                "Only a lead of that lab or an administrator reserves for it.",
                code="forbidden",
                status_code=403,
                field="lab",
            )
        asked = reservations.ReservationRequest(
            lab=lab,
            purpose=data["purpose"],
            starts_at=data["starts_at"],
            ends_at=data["ends_at"],
            gpus=data.get("gpus"),
            workstations=tuple(data.get("workstations") or ()),
        )
        try:
            made = reservations.reservation_create(actor=request.user, asked=asked)
        except reservations.ReservationError as exc:
            raise ApiError(exc.message, code="invalid", status_code=400, field=exc.field) from exc
        return Response(ReservationSerializer(made).data, status=201)


class ReservationDetailView(APIView):
    @extend_schema(
        summary="One reservation",
        responses={
            200: ReservationSerializer,
            401: OpenApiResponse(ErrorSerializer, description="No valid token or session."),
            404: OpenApiResponse(ErrorSerializer, description="No such reservation."),
        },
    )
    def get(self, request: Request, public_id) -> Response:
        return Response(ReservationSerializer(_reservation_or_404(public_id)).data)

    @extend_schema(
        summary="Cancel a reservation (its lab's leads and admins)",
        responses={
            200: ReservationSerializer,
            400: OpenApiResponse(ErrorSerializer, description="It has ended already."),
            401: OpenApiResponse(ErrorSerializer, description="No valid token or session."),
            403: OpenApiResponse(ErrorSerializer, description="Not a lead of its lab."),
            404: OpenApiResponse(ErrorSerializer, description="No such reservation."),
        },
    )
    def delete(self, request: Request, public_id) -> Response:
        reservation = _reservation_or_404(public_id)
        if not labs_managed_by(request.user).filter(pk=reservation.lab_id).exists():
            raise ApiError(
                "Only a lead of its lab or an administrator cancels it.",
                code="forbidden",
                status_code=403,
            )
        try:
            reservations.reservation_cancel(actor=request.user, reservation=reservation)
        except reservations.ReservationError as exc:
            raise ApiError(exc.message, code="invalid", status_code=400) from exc
        return Response(ReservationSerializer(reservation).data)


def _reservation_or_404(public_id) -> Reservation:
    found = Reservation.objects.select_related("lab", "created_by").filter(public_id=public_id)
    reservation = found.first()
    if reservation is None:
        raise ApiError("No such reservation.", code="not_found", status_code=404)
    return reservation
