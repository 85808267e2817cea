"""Personal access tokens through the API: list, create, revoke; and a token for a password."""

from __future__ import annotations

import dataclasses

from axes.exceptions import AxesBackendPermissionDenied
from django.conf import settings
from django.contrib.auth import authenticate
from django.db.models import Count
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounting.services import quota_standings
from jobs.selectors import job_list_for_user
from plumbing.api import ApiError, ErrorSerializer, TokenThrottle, error_responses

from . import selectors, services
from .models import AccessToken


class AccessTokenSerializer(serializers.ModelSerializer):
    status = serializers.ChoiceField(
        choices=["active", "expired", "revoked"], help_text="Whether it still works."
    )

    class Meta:
        model = AccessToken
        fields = ["id", "name", "prefix", "created_at", "expires_at", "last_used_at", "status"]
        extra_kwargs = {
            "id": {"help_text": "Use it to revoke the token."},
            "created_at": {"help_text": "When it was created."},
            "name": {"help_text": "Where it is used, e.g. laptop CLI."},
            "prefix": {"help_text": "Its first characters, to tell tokens apart."},
            "expires_at": {"help_text": "When it stops working; null for never."},
            "last_used_at": {"help_text": "About when it was last used (to the minute)."},
        }


class NewTokenSerializer(AccessTokenSerializer):
    token = serializers.CharField(help_text="The secret. Shown only now: store it.")

    class Meta(AccessTokenSerializer.Meta):
        fields = [*AccessTokenSerializer.Meta.fields, "token"]


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="Where you will use it.")
    expires_in_days = serializers.IntegerField(
        min_value=1,
        max_value=services.MAX_EXPIRY_DAYS,
        required=False,
        allow_null=True,
        help_text="Days until it stops working; null or absent for never.",
    )


class PasswordTokenSerializer(TokenCreateSerializer):
    username = serializers.CharField(max_length=150, help_text="Your Nightshift username.")
    password = serializers.CharField(
        max_length=4096, trim_whitespace=False, help_text="Your Nightshift password."
    )


def _created(new: services.NewToken) -> Response:
    data = AccessTokenSerializer(new.token).data | {"token": new.secret}
    return Response(data, status=status.HTTP_201_CREATED)


def _create(*, user, name: str, expires_in_days: int | None) -> services.NewToken:
    try:
        return services.token_create(user=user, name=name, expires_in_days=expires_in_days)
    except services.TokenError as exc:
        status_code = 429 if exc.code == "throttled" else 400
        raise ApiError(
            exc.message, code=exc.code, status_code=status_code, field=exc.field
        ) from None


ERROR = OpenApiResponse(ErrorSerializer)


class TokenListView(APIView):
    def get_throttles(self):
        return [TokenThrottle()] if self.request.method == "POST" else []

    @extend_schema(
        summary="List your access tokens",
        responses={200: AccessTokenSerializer(many=True), 401: ERROR},
    )
    def get(self, request: Request) -> Response:
        tokens = selectors.token_list_for_user(request.user)
        return Response(AccessTokenSerializer(tokens, many=True).data)

    @extend_schema(
        summary="Create an access token",
        request=TokenCreateSerializer,
        responses={201: NewTokenSerializer, 400: ERROR, 401: ERROR, 429: ERROR},
    )
    def post(self, request: Request) -> Response:
        form = TokenCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        return _created(
            _create(
                user=request.user, name=data["name"], expires_in_days=data.get("expires_in_days")
            )
        )


class TokenDetailView(APIView):
    @extend_schema(summary="Revoke an access token", responses={204: None, 401: ERROR, 404: ERROR})
    def delete(self, request: Request, token_id: int) -> Response:
        try:
            token = selectors.token_get_for_user(request.user, token_id)
        except AccessToken.DoesNotExist:
            raise Http404("No such token.") from None
        services.token_revoke(token=token, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PasswordTokenView(APIView):
    """How `nightshift login` turns a username and password into a token."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [TokenThrottle]

    @extend_schema(
        summary="Create an access token with your username and password",
        description="For accounts with a local password. Campus sign-in accounts create "
        "tokens on the API tokens page instead.",
        request=PasswordTokenSerializer,
        auth=[],
        responses={201: NewTokenSerializer, 400: ERROR, 401: ERROR, 429: ERROR},
    )
    def post(self, request: Request) -> Response:
        form = PasswordTokenSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            user = authenticate(
                request._request, username=data["username"], password=data["password"]
            )
        except AxesBackendPermissionDenied:
            raise ApiError(
                "Too many failed sign-ins for this username from your address; try again later.",
                code="throttled",
                status_code=429,
            ) from None
        if user is None:
            raise ApiError(
                "The username or password is not right.",
                code="authentication_failed",
                status_code=401,
            )
        return _created(
            _create(user=user, name=data["name"], expires_in_days=data.get("expires_in_days"))
        )


class QuotaLimitsSerializer(serializers.Serializer):
    gpu_hours = serializers.FloatField(allow_null=True, help_text="Per rolling period.")
    period_days = serializers.IntegerField(help_text="The rolling period, in days.")
    max_concurrent_gpus = serializers.IntegerField(allow_null=True, help_text="GPUs at once.")
    max_gpus_per_job = serializers.IntegerField(allow_null=True, help_text="GPUs per job.")
    max_runtime_hours = serializers.FloatField(allow_null=True, help_text="Runtime per job.")
    max_queued_jobs = serializers.IntegerField(allow_null=True, help_text="Waiting jobs at once.")
    scope = serializers.DictField(
        child=serializers.CharField(),
        help_text="Per limit: lab (counts the whole lab) or user (your own limit).",
    )


class QuotaStandingSerializer(serializers.Serializer):
    lab = serializers.CharField(
        allow_null=True, help_text="The lab; null for the site's default quota."
    )
    accounting_group = serializers.CharField(
        help_text="The HTCondor accounting group of these jobs."
    )
    limits = QuotaLimitsSerializer(help_text="Empty values mean no limit.")
    gpu_hours_used = serializers.FloatField(help_text="In the rolling period.")
    gpu_hours_reserved = serializers.FloatField(help_text="Held by jobs not yet running.")
    gpus_in_use = serializers.IntegerField(help_text="Asked for by unfinished jobs.")
    jobs_waiting = serializers.IntegerField(help_text="Jobs not yet running.")


class UserSummarySerializer(serializers.Serializer):
    username = serializers.CharField(help_text="Your username.")
    email = serializers.EmailField(allow_blank=True, help_text="Where notifications go.")
    full_name = serializers.CharField(allow_blank=True, help_text="Your name.")
    is_staff = serializers.BooleanField(help_text="You are a Nightshift administrator.")
    jobs_by_state = serializers.DictField(
        child=serializers.IntegerField(), help_text="The user's jobs, counted by state."
    )
    quotas = QuotaStandingSerializer(
        many=True,
        help_text="For each of your labs (or the site's default, in none): limits and usage.",
    )


class MeView(APIView):
    @extend_schema(
        summary="You, and your jobs by state",
        responses={200: UserSummarySerializer, **error_responses(401)},
    )
    def get(self, request: Request) -> Response:
        user = request.user
        counts = job_list_for_user(user).order_by().values("state").annotate(n=Count("id"))
        return Response(
            {
                "username": user.get_username(),
                "email": user.email,
                "full_name": user.get_full_name(),
                "is_staff": user.is_staff,
                "jobs_by_state": {row["state"]: row["n"] for row in counts},
                "quotas": [_standing(standing) for standing in quota_standings(user)],
            }
        )


def _standing(standing) -> dict:
    fields = dataclasses.asdict(standing.limits) | {"scope": standing.limits.scope}
    fields.pop("lab")
    return {
        "lab": standing.lab.name if standing.lab else None,
        "accounting_group": standing.lab.accounting_group
        if standing.lab
        else settings.DEFAULT_ACCOUNTING_GROUP,
        "limits": fields,
        "gpu_hours_used": round(standing.gpu_hours_used, 3),
        "gpu_hours_reserved": round(standing.gpu_hours_reserved, 3),
        "gpus_in_use": standing.gpus_in_use,
        "jobs_waiting": standing.jobs_waiting,
    }
