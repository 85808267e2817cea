"""Campus sign-on end to end against a real (local) OpenID Connect provider."""

from urllib.parse import urlsplit

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from oidc_provider_mock import User, run_server_in_thread

pytestmark = pytest.mark.django_db

ADA_CLAIMS = {
    "email": "ada@campus.example",
    "email_verified": True,
    "preferred_username": "ada",
    "given_name": "Ada",
    "family_name": "Lovelace",
}
ADA = User(sub="ada-campus-id", claims=ADA_CLAIMS)
# A provider account whose address the provider has not verified.
UNVERIFIED = User(
    sub="someone-else-id",
    claims={**ADA_CLAIMS, "email_verified": False, "preferred_username": "someone"},
)


@pytest.fixture
def provider(settings):
    with run_server_in_thread(user_claims=[ADA, UNVERIFIED]) as server:
        base = f"http://localhost:{server.server_port}"
        settings.OIDC_ENABLED = True
        settings.OIDC_RP_CLIENT_ID = "nightshift"
        settings.OIDC_RP_CLIENT_SECRET = "a-client-secret"
        settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{base}/oauth2/authorize"
        settings.OIDC_OP_TOKEN_ENDPOINT = f"{base}/oauth2/token"
        settings.OIDC_OP_USER_ENDPOINT = f"{base}/userinfo"
        settings.OIDC_OP_JWKS_ENDPOINT = f"{base}/jwks"
        settings.OIDC_VERIFY_KID = False  # the mock provider's one key has no kid
        settings.AUTHENTICATION_BACKENDS = [
            *settings.AUTHENTICATION_BACKENDS,
            "accounts.oidc.CampusOIDCBackend",
        ]
        yield base


def sign_in_at_the_provider(client, subject: str):
    """Start at the portal, choose `subject` at the provider, come back with a code."""
    start = client.get(reverse("oidc_authentication_init"))
    assert start.status_code == 302
    chosen = httpx.post(start["Location"], data={"sub": subject}, follow_redirects=False)
    assert chosen.status_code == 302, chosen.text[:500]
    callback = urlsplit(chosen.headers["Location"])
    return client.get(f"{callback.path}?{callback.query}")


def test_a_new_campus_user_is_created_and_signed_in(client, provider):
    assert "Sign in with your campus account" in client.get(reverse("login")).content.decode()
    response = sign_in_at_the_provider(client, ADA.sub)
    assert response.status_code == 302
    assert response["Location"] == reverse("jobs:list")
    user = get_user_model().objects.get(email="ada@campus.example")
    assert (user.username, user.get_full_name()) == ("ada", "Ada Lovelace")
    assert client.get(reverse("jobs:list")).status_code == 200


def test_an_account_an_admin_made_is_matched_by_a_verified_email_then_by_subject(client, provider):
    existing = get_user_model().objects.create_user("alovelace", email="ADA@campus.example")
    sign_in_at_the_provider(client, ADA.sub)
    assert get_user_model().objects.count() == 1
    assert int(client.session["_auth_user_id"]) == existing.pk
    assert existing.campus_identities.get().subject == ADA.sub
    # From then on the subject finds it, whatever its e-mail address becomes.
    get_user_model().objects.filter(pk=existing.pk).update(email="ada@elsewhere.example")
    client.logout()
    sign_in_at_the_provider(client, ADA.sub)
    assert int(client.session["_auth_user_id"]) == existing.pk


def test_an_unverified_address_never_takes_over_an_account(client, provider):
    existing = get_user_model().objects.create_user("alovelace", email="ada@campus.example")
    sign_in_at_the_provider(client, UNVERIFIED.sub)
    signed_in = int(client.session["_auth_user_id"])
    assert signed_in != existing.pk
    assert get_user_model().objects.get(pk=signed_in).username == "someone"
    assert not existing.campus_identities.exists()


def test_a_self_registered_account_is_never_taken_over_by_its_address(client, provider):
    """Someone registers the victim's campus address first: the victim's first campus
    sign-on gets an account of its own, never theirs."""
    register = client.post(
        reverse("accounts:register"),
        {
            "username": "squatter",
            "email": "ada@campus.example",
            "password1": "a-long-test-password",
            "password2": "a-long-test-password",
        },
    )
    assert register.status_code == 302, register.content.decode()[:1000]
    squatter = get_user_model().objects.get(username="squatter")
    client.logout()
    sign_in_at_the_provider(client, ADA.sub)
    signed_in = get_user_model().objects.get(pk=int(client.session["_auth_user_id"]))
    assert signed_in != squatter
    assert signed_in.campus_identities.get().subject == ADA.sub
    assert not squatter.campus_identities.exists()


def test_a_taken_username_gets_a_number(client, provider):
    get_user_model().objects.create_user("ada", email="someone-else@example.org")
    sign_in_at_the_provider(client, ADA.sub)
    assert get_user_model().objects.get(email="ada@campus.example").username == "ada2"


def test_campus_sign_on_is_off_unless_configured(client):
    assert client.get(reverse("oidc_authentication_init")).status_code == 404
    assert "campus account" not in client.get(reverse("login")).content.decode()
