"""`Authorization: Bearer nsk_...`: an execute-node kit's credential, accepted by the kit's
own endpoints alone (`KitEndpoint`: forecasts.api, lending.api). Everywhere else the API
does not know the scheme, so a kit's credential is a 401 there, like any unknown token."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_variables
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse
from rest_framework import authentication, exceptions
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from plumbing.api import ApiError, ErrorSerializer

from .kit import kit_credential_authenticate
from .models import KitCredential


@dataclass(frozen=True)
class KitPrincipal:
    """Who a kit's request is from: no account, no permission, only its credential."""

    credential: KitCredential
    is_authenticated: bool = True
    is_staff: bool = False
    is_superuser: bool = False
    is_active: bool = True
    pk: None = None

    def has_perm(self, perm: str, obj=None) -> bool:
        return False

    def get_username(self) -> str:
        return f"kit:{self.credential.label}"


class KitCredentialAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    @method_decorator(sensitive_variables("header", "secret"))
    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if len(header) != 2 or header[0].lower() != self.keyword.lower().encode():
            return None
        secret = header[1].decode("ascii", errors="replace")
        if not secret.startswith(KitCredential.PREFIX):
            return None  # a person's token: the next authentication's to judge
        credential = kit_credential_authenticate(secret)
        if credential is None:
            raise exceptions.AuthenticationFailed(
                "That kit credential is not valid: it may have been replaced (manage.py "
                "kit_token) or revoked."
            )
        return KitPrincipal(credential), credential

    def authenticate_header(self, request) -> str:
        return f'{self.keyword} realm="api"'


class KitCredentialScheme(OpenApiAuthenticationExtension):
    target_class = "forecasts.authentication.KitCredentialAuthentication"
    name = "kitCredential"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An execute-node kit's credential (nsk_...), from manage.py "
            "kit_token: its own workstations' placement figures and reservations only.",
        }


WORKSTATION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def check_kit_request(request: Request, workstation: str, *, what: str) -> None:
    """What an execute-node kit may ask: a kit credential that names this workstation, or
    an admin (who may view forecasts); and the name is a workstation's."""
    if isinstance(request.auth, KitCredential):
        if not request.auth.covers(workstation):
            raise ApiError(
                f"This kit's credential is for {', '.join(request.auth.workstations)}"
                f", not {workstation}.",
                code="forbidden",
                status_code=403,
            )
    elif not (
        request.user.is_staff and request.user.has_perm("forecasts.view_workstationforecast")
    ):
        raise ApiError(
            f"Only the workstation's execute-node kit (its credential, made by "
            f"manage.py kit_token) and admins read {what}.",
            code="forbidden",
            status_code=403,
        )
    if not WORKSTATION_NAME.fullmatch(workstation):
        raise ApiError("That is not a workstation name.", code="invalid", status_code=400)


def kit_refusals(forbidden: str) -> dict[int, OpenApiResponse]:
    """What a kit endpoint answers besides its success, for its OpenAPI schema; `forbidden`
    says why a token that is not this workstation's gets 403."""
    return {
        400: OpenApiResponse(ErrorSerializer, description="Not a workstation's name."),
        401: OpenApiResponse(ErrorSerializer, description="No valid token or session."),
        403: OpenApiResponse(ErrorSerializer, description=forbidden),
    }


class KitEndpoint(APIView):
    """Accepts a kit's credential besides the API's usual authentication."""

    authentication_classes = [
        KitCredentialAuthentication,
        *api_settings.DEFAULT_AUTHENTICATION_CLASSES,
    ]
