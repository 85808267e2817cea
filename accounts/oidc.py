"""Campus single sign-on with OpenID Connect (mozilla-django-oidc), off unless configured."""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import Http404
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from audit.services import audit_record

from .models import CampusIdentity


def email_verified(claims: dict) -> bool:
    return claims.get("email_verified") in (True, "true")


class CampusOIDCBackend(OIDCAuthenticationBackend):
    """A campus sign-on finds its account by the provider's subject. The first time, it
    may take over an existing account by e-mail, but only where the provider says the
    address is verified and the account's address is one nobody could have typed for
    someone else: an account an admin made, or one from the campus directory (LDAP), never
    a self-registered one (registration does not check addresses). Otherwise it gets an
    account of its own; a new one gets a readable username from the claims."""

    def filter_users_by_claims(self, claims: dict):
        users = get_user_model().objects
        subject = str(claims.get("sub") or "")
        if subject:
            linked = users.filter(
                campus_identities__issuer=issuer(), campus_identities__subject=subject
            )
            if linked.exists():
                return linked
        email = claims.get("email")
        if not email or not email_verified(claims):
            return users.none()
        return users.filter(email__iexact=email, registration__isnull=True, is_active=True)

    def update_user(self, user, claims: dict):
        _link(user, claims)
        return user

    def create_user(self, claims: dict):
        email = claims.get("email", "")
        wanted = claims.get("preferred_username") or email.split("@", 1)[0] or "user"
        username = self._free_username(re.sub(r"[^\w.@+-]", "_", str(wanted))[:140] or "user")
        user = get_user_model().objects.create_user(
            username,
            email=email,
            first_name=str(claims.get("given_name", ""))[:150],
            last_name=str(claims.get("family_name", ""))[:150],
        )
        audit_record(action="account.create", actor=user, target=user, detail="campus sign-on")
        _link(user, claims)
        return user

    @staticmethod
    def _free_username(base: str) -> str:
        users = get_user_model().objects
        candidate, number = base, 1
        while users.filter(username__iexact=candidate).exists():
            number += 1
            candidate = f"{base}{number}"
        return candidate


def issuer() -> str:
    """The provider, as the portal is configured to reach it."""
    return settings.OIDC_OP_AUTHORIZATION_ENDPOINT


def _link(user, claims: dict) -> None:
    subject = str(claims.get("sub") or "")[:255]
    if not subject:
        return
    _, created = CampusIdentity.objects.get_or_create(
        issuer=issuer(), subject=subject, defaults={"user": user}
    )
    if created:
        audit_record(
            action="account.campus_link", actor=user, target=user, detail=f"subject {subject}"
        )


class _Enabled:
    def dispatch(self, request, *args, **kwargs):
        if not settings.OIDC_ENABLED:
            raise Http404("Campus sign-on is not configured.")
        return super().dispatch(request, *args, **kwargs)


class CampusAuthenticationRequestView(_Enabled, OIDCAuthenticationRequestView):
    pass


class CampusAuthenticationCallbackView(_Enabled, OIDCAuthenticationCallbackView):
    pass
