"""/api/v1/pool/terms/<workstation>/ (what the workstation's kit publishes) and
/api/v1/workstations/...: an owner's workstations, their terms, and asking one back."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from forecasts.services import KitEndpoint, check_kit_request, kit_refusals
from labs.models import Lab
from plumbing.api import ApiError, ErrorSerializer

from . import selectors, services
from .models import LendingTerms


class KitTermsSerializer(serializers.Serializer):
    days = serializers.ListField(child=serializers.IntegerField(), help_text="0 is Monday.")
    from_minute = serializers.IntegerField(help_text="Lent from this minute of the day.")
    until_minute = serializers.IntegerField(help_text="Until this minute of the day.")
    away_after_s = serializers.IntegerField(
        allow_null=True, help_text="Lent only after this long without keyboard or mouse."
    )
    max_gpus = serializers.IntegerField(allow_null=True, help_text="At most this many GPUs.")
    max_memory_mb = serializers.IntegerField(allow_null=True, help_text="At most this memory.")
    accounting_groups = serializers.ListField(
        child=serializers.CharField(), allow_null=True, help_text="Only these labs' groups."
    )
    paused_until = serializers.DateTimeField(allow_null=True, help_text="Not lent until then.")


class KitReclaimSerializer(serializers.Serializer):
    deadline = serializers.DateTimeField(help_text="When its jobs must have left.")
    until = serializers.DateTimeField(help_text="When it is lent again.")


class KitLendingSerializer(serializers.Serializer):
    workstation = serializers.CharField(help_text="The workstation, as the pool names it.")
    time_zone = serializers.CharField(help_text="The time zone of the days and minutes.")
    terms = KitTermsSerializer(allow_null=True, help_text="None: lent as the kit's policy says.")
    reclaim = KitReclaimSerializer(allow_null=True, help_text="Its owner asked for it back.")


class KitTermsView(KitEndpoint):
    @extend_schema(
        summary="A workstation's lending terms (for its execute-node kit)",
        description="Needs the workstation's kit credential (Bearer nsk_...) or an admin's "
        "token. The kit's startd cron reads it at every run and publishes it in the machine "
        "ad, where START and PREEMPT honour it.",
        responses={
            200: KitLendingSerializer,
            **kit_refusals("Not this workstation's kit."),
        },
    )
    def get(self, request: Request, workstation: str) -> Response:
        check_kit_request(request, workstation, what="a workstation's lending terms")
        return Response(KitLendingSerializer(selectors.terms_for_kit(workstation)).data)


# What every owner endpoint may answer besides its success.
NOT_SIGNED_IN = {401: OpenApiResponse(ErrorSerializer, description="No valid token or session.")}
NOT_YOURS = {404: OpenApiResponse(ErrorSerializer, description="No such workstation of yours.")}
INVALID = {400: OpenApiResponse(ErrorSerializer, description="What is wrong with the input.")}


class KitClaimCodeSerializer(serializers.Serializer):
    workstation = serializers.CharField(help_text="The workstation the code claims.")
    code = serializers.CharField(help_text="The one-time code, e.g. NS-7KQ2-M9XD.")
    expires_at = serializers.DateTimeField(help_text="After this the code is worthless.")


class KitClaimCodeView(KitEndpoint):
    @extend_schema(
        summary="A one-time code for a workstation's owner to claim it (for its kit)",
        description="Needs the workstation's kit credential (Bearer nsk_...) or an admin's "
        "token. `nightshift-claim-code`, run on the workstation, prints it: whoever signs in "
        "and enters it at /workstations/claim/ becomes an owner. A new code replaces one not "
        "yet used.",
        request=None,
        responses={
            201: KitClaimCodeSerializer,
            **kit_refusals("Not this workstation's kit."),
        },
    )
    def post(self, request: Request, workstation: str) -> Response:
        check_kit_request(request, workstation, what="claim codes")
        code, made = services.claim_code_create(workstation=workstation)
        payload = {"workstation": workstation, "code": code, "expires_at": made.expires_at}
        return Response(KitClaimCodeSerializer(payload).data, status=201)


def _managed(request: Request, workstation: str) -> None:
    if not selectors.may_manage(request.user, workstation):
        # Nobody learns which workstations exist, or whose they are.
        raise ApiError("No such workstation of yours.", code="not_found", status_code=404)


class TermsSerializer(serializers.Serializer):
    days = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=6),
        min_length=1,
        max_length=7,
        help_text="The days it may be lent, 0 (Monday) to 6 (Sunday), campus time.",
    )
    from_minute = serializers.IntegerField(
        min_value=0, max_value=1439, default=0, help_text="Lent from this minute of the day."
    )
    until_minute = serializers.IntegerField(
        min_value=1, max_value=1440, default=1440, help_text="Until this minute (1440: midnight)."
    )
    only_while_away = serializers.BooleanField(
        default=False, help_text="Lent only while nobody uses its keyboard or mouse."
    )
    away_after_minutes = serializers.IntegerField(
        min_value=1, max_value=1440, default=15, help_text="How long idle counts as away."
    )
    max_gpus = serializers.IntegerField(
        min_value=0,
        max_value=64,
        allow_null=True,
        default=None,
        help_text="At most this many GPUs lent at once; null: all.",
    )
    max_memory_gb = serializers.IntegerField(
        min_value=1,
        max_value=16384,
        allow_null=True,
        default=None,
        help_text="At most this much memory lent at once (GB); null: all.",
    )
    labs = serializers.SlugRelatedField(
        slug_field="name",
        queryset=Lab.objects.all(),
        many=True,
        required=False,
        help_text="Only these labs (their names); empty: every lab.",
    )
    paused_until = serializers.DateTimeField(
        allow_null=True, default=None, help_text="Not lent at all until then; null: not paused."
    )


class TermsView(APIView):
    @extend_schema(
        summary="A workstation's lending terms (its owners and admins)",
        responses={200: TermsSerializer, **NOT_SIGNED_IN, **NOT_YOURS},
    )
    def get(self, request: Request, workstation: str) -> Response:
        _managed(request, workstation)
        terms = selectors.terms_of(workstation) or LendingTerms(workstation=workstation)
        labs = list(terms.labs.all()) if terms.pk else []
        return Response(TermsSerializer({**_fields(terms), "labs": labs}).data)

    @extend_schema(
        summary="Set a workstation's lending terms",
        request=TermsSerializer,
        responses={200: TermsSerializer, **INVALID, **NOT_SIGNED_IN, **NOT_YOURS},
    )
    def put(self, request: Request, workstation: str) -> Response:
        _managed(request, workstation)
        given = TermsSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            terms = services.terms_set(
                user=request.user,
                workstation=workstation,
                change=services.TermsChange(**given.validated_data),
            )
        except services.LendingError as exc:
            raise ApiError(exc.message, code="invalid", status_code=400, field=exc.field) from None
        return Response(TermsSerializer({**_fields(terms), "labs": list(terms.labs.all())}).data)


def _fields(terms: LendingTerms) -> dict:
    names = (
        "days",
        "from_minute",
        "until_minute",
        "only_while_away",
        "away_after_minutes",
        "max_gpus",
        "max_memory_gb",
        "paused_until",
    )
    return {name: getattr(terms, name) for name in names}


class ReclaimRequestSerializer(serializers.Serializer):
    minutes = serializers.IntegerField(
        min_value=1,
        max_value=services.RECLAIM_MAX_MINUTES,
        help_text="The workstation is yours again within this many minutes.",
    )


class ReclaimSerializer(serializers.Serializer):
    workstation = serializers.CharField(help_text="The workstation asked back.")
    deadline = serializers.DateTimeField(help_text="When it is yours.")
    until = serializers.DateTimeField(help_text="When it is lent again by itself.")
    seconds_left = serializers.SerializerMethodField(help_text="Until the deadline.")

    def get_seconds_left(self, reclaim) -> int:
        return reclaim.seconds_left(timezone.now())


class ReclaimView(APIView):
    @extend_schema(
        summary="I need it back: no new job, running ones checkpoint and leave in time",
        request=ReclaimRequestSerializer,
        responses={201: ReclaimSerializer, **INVALID, **NOT_SIGNED_IN, **NOT_YOURS},
    )
    def post(self, request: Request, workstation: str) -> Response:
        _managed(request, workstation)
        asked = ReclaimRequestSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        reclaim = services.reclaim_request(
            user=request.user, workstation=workstation, minutes=asked.validated_data["minutes"]
        )
        return Response(ReclaimSerializer(reclaim).data, status=201)

    @extend_schema(
        summary="Lend it again now, before the request ends by itself",
        responses={204: None, **NOT_SIGNED_IN, **NOT_YOURS},
    )
    def delete(self, request: Request, workstation: str) -> Response:
        _managed(request, workstation)
        services.reclaim_end(user=request.user, workstation=workstation)
        return Response(status=204)


class OwnedSerializer(serializers.Serializer):
    workstation = serializers.CharField(help_text="A workstation you own, as the pool names it.")


class OwnedListView(APIView):
    @extend_schema(
        summary="The workstations you own",
        responses={200: OwnedSerializer(many=True), **NOT_SIGNED_IN},
    )
    def get(self, request: Request) -> Response:
        owned = selectors.workstations_owned_by(request.user)
        return Response(OwnedSerializer([{"workstation": name} for name in owned], many=True).data)
