from __future__ import annotations

from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_variables
from rest_framework import authentication, exceptions

from audit.services import note_token

from .services import token_authenticate


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <personal access token>`."""

    keyword = "Bearer"

    @method_decorator(sensitive_variables("header", "secret"))
    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "The Authorization header must be “Bearer <token>”, with no spaces in the token."
            )
        try:
            secret = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("That token is not valid.") from None
        token = token_authenticate(secret)
        if token is None:
            raise exceptions.AuthenticationFailed(
                "That token is not valid: it may be mistyped, expired or revoked."
            )
        note_token(token.prefix)
        return token.user, token

    def authenticate_header(self, request) -> str:
        # Makes a missing or bad token a 401, not a 403.
        return f'{self.keyword} realm="api"'
