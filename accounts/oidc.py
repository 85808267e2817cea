"""Campus single sign-on with OpenID Connect (mozilla-django-oidc), off unless configured."""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import Http404
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from audit.services import audit_record


class CampusOIDCBackend(OIDCAuthenticationBackend):
    """Users are matched by e-mail; a new one gets a readable username from the claims."""

    def create_user(self, claims: dict):
        email = claims.get("email", "")
        wanted = claims.get("preferred_username") or email.split("@", 1)[0] or "user"
        username = self._free_username(re.sub(r"[^\w.@+-]", "_", str(wanted))[:140] or "user")
        user = get_user_model().objects.create_user(
            username, email=email, first_name=str(claims.get("given_name", ""))[:150],
            last_name=str(claims.get("family_name", ""))[:150],
        )  # fmt: skip
        audit_record(action="account.create", actor=user, target=user, detail="campus sign-on")
        return user

    @staticmethod
    def _free_username(base: str) -> str:
        users = get_user_model().objects
        candidate, number = base, 1
        while users.filter(username__iexact=candidate).exists():
            number += 1
            candidate = f"{base}{number}"
        return candidate


class _Enabled:
    def dispatch(self, request, *args, **kwargs):
        if not settings.OIDC_ENABLED:
            raise Http404("Campus sign-on is not configured.")
        return super().dispatch(request, *args, **kwargs)


class CampusAuthenticationRequestView(_Enabled, OIDCAuthenticationRequestView):
    pass


class CampusAuthenticationCallbackView(_Enabled, OIDCAuthenticationCallbackView):
    pass
