"""Tokens through the API: create, list, revoke, and `nightshift login`'s password exchange."""

import pytest
from django.urls import reverse

from accounts.models import AccessToken
from audit.models import AuditEntry

pytestmark = pytest.mark.django_db
TOKENS = reverse("api:token-list")


def test_a_token_is_created_shown_once_and_listed_without_its_secret(api, student):
    response = api.post(TOKENS, {"name": "notebook", "expires_in_days": 30}, format="json")
    assert response.status_code == 201
    secret = response.json()["token"]
    assert secret.startswith("nst_")
    listed = api.get(TOKENS).json()
    assert {t["name"] for t in listed} == {"tests", "notebook"}
    assert secret not in str(listed)
    created = AuditEntry.objects.filter(action="token.create", actor=student)
    assert created.count() == 2
    assert created.first().via == "api"  # the newest, made through the API with a token
    assert created.first().token_prefix == student.access_tokens.get(name="tests").prefix


def test_revoking_through_the_api_is_a_204_and_recorded(api, student):
    token = AccessToken.objects.get(user=student)
    response = api.delete(reverse("api:token-detail", args=[token.pk]))
    assert response.status_code == 204
    token.refresh_from_db()
    assert token.status == "revoked"
    assert api.get(reverse("api:me")).status_code == 401  # it was this very token


def test_a_password_gets_a_token_for_the_cli(anonymous_api, student):
    response = anonymous_api.post(
        reverse("api:password-token"),
        {"username": "student", "password": "a-long-test-password", "name": "cli"},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["name"] == "cli"


def test_a_wrong_password_is_a_401_that_does_not_say_which_part_was_wrong(anonymous_api, student):
    for username in ("student", "nobody"):
        response = anonymous_api.post(
            reverse("api:password-token"),
            {"username": username, "password": "wrong", "name": "cli"},
            format="json",
        )
        assert response.status_code == 401
        assert response.json()["error"]["message"] == "The username or password is not right."
    assert not AccessToken.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "a\x07b"}, "name"),
        ({"name": "x", "expires_in_days": 0}, "expires_in_days"),
        ({"name": "x", "expires_in_days": "soon"}, "expires_in_days"),
    ],
)
def test_a_bad_token_request_names_the_field(api, body, field):
    response = api.post(TOKENS, body, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
