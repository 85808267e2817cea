"""Personal access tokens through the API: list, create, revoke; and a token for a password."""

from __future__ import annotations

from axes.exceptions import AxesBackendPermissionDenied
from django.contrib.auth import authenticate
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from plumbing.api import ApiError, ErrorSerializer, TokenThrottle

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
        min_value=1, max_value=services.MAX_EXPIRY_DAYS, required=False, allow_null=True,
        help_text="Days until it stops working; null or absent for never.",
    )  # fmt: skip


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
        raise ApiError(exc.message, code=exc.code, status_code=status_code,
                       field=exc.field) from None  # fmt: skip


ERROR = OpenApiResponse(ErrorSerializer)


class TokenListView(APIView):
    def get_throttles(self):
        return [TokenThrottle()] if self.request.method == "POST" else []

    @extend_schema(summary="List your access tokens",
                   responses={200: AccessTokenSerializer(many=True), 401: ERROR})  # fmt: skip
    def get(self, request: Request) -> Response:
        tokens = selectors.token_list_for_user(request.user)
        return Response(AccessTokenSerializer(tokens, many=True).data)

    @extend_schema(summary="Create an access token", request=TokenCreateSerializer,
                   responses={201: NewTokenSerializer, 400: ERROR, 401: ERROR,
                              429: ERROR})  # fmt: skip
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
        request=PasswordTokenSerializer, auth=[],
        responses={201: NewTokenSerializer, 400: ERROR, 401: ERROR, 429: ERROR},
    )  # fmt: skip
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
                code="throttled", status_code=429,
            ) from None  # fmt: skip
        if user is None:
            raise ApiError("The username or password is not right.",
                           code="authentication_failed", status_code=401)  # fmt: skip
        return _created(
            _create(user=user, name=data["name"], expires_in_days=data.get("expires_in_days"))
        )
