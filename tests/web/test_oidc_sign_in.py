"""Campus sign-on end to end against a real (local) OpenID Connect provider."""

from urllib.parse import urlsplit

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from oidc_provider_mock import User, run_server_in_thread

pytestmark = pytest.mark.django_db

ADA_CLAIMS = {"email": "ada@campus.example", "preferred_username": "ada", "given_name": "Ada",
              "family_name": "Lovelace"}  # fmt: skip
ADA = User(sub="ada-campus-id", claims=ADA_CLAIMS)


@pytest.fixture
def provider(settings):
    with run_server_in_thread(user_claims=[ADA]) as server:
        base = f"http://localhost:{server.server_port}"
        settings.OIDC_ENABLED = True
        settings.OIDC_RP_CLIENT_ID = "nightshift"
        settings.OIDC_RP_CLIENT_SECRET = "a-client-secret"
        settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{base}/oauth2/authorize"
        settings.OIDC_OP_TOKEN_ENDPOINT = f"{base}/oauth2/token"
        settings.OIDC_OP_USER_ENDPOINT = f"{base}/userinfo"
        settings.OIDC_OP_JWKS_ENDPOINT = f"{base}/jwks"
        settings.OIDC_VERIFY_KID = False  # the mock provider's one key has no kid
        settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS,
                                            "accounts.oidc.CampusOIDCBackend"]  # fmt: skip
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


def test_an_existing_user_is_matched_by_email(client, provider):
    existing = get_user_model().objects.create_user("alovelace", email="ADA@campus.example")
    sign_in_at_the_provider(client, ADA.sub)
    assert get_user_model().objects.count() == 1
    assert int(client.session["_auth_user_id"]) == existing.pk


def test_a_taken_username_gets_a_number(client, provider):
    get_user_model().objects.create_user("ada", email="someone-else@example.org")
    sign_in_at_the_provider(client, ADA.sub)
    assert get_user_model().objects.get(email="ada@campus.example").username == "ada2"


def test_campus_sign_on_is_off_unless_configured(client):
    assert client.get(reverse("oidc_authentication_init")).status_code == 404
    assert "campus account" not in client.get(reverse("login")).content.decode()
