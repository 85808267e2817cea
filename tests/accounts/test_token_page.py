"""The API tokens page: create a token (shown once), see it listed, revoke it."""

import pytest
from django.urls import reverse

from accounts.models import AccessToken
from audit.models import AuditEntry

pytestmark = pytest.mark.django_db
PAGE = reverse("accounts:tokens")


def test_the_page_needs_a_login(client):
    assert client.get(PAGE).status_code == 302


def test_creating_a_token_shows_its_secret_once(student_client, student):
    response = student_client.post(PAGE, {"name": "laptop CLI", "expires_in_days": "90"})
    body = response.content.decode()
    token = AccessToken.objects.get(user=student)
    assert response.status_code == 200
    assert "Copy it now" in body
    secret = body.split('id="new-token">')[1].split("<")[0]
    assert secret.startswith(token.prefix)
    assert token.expires_at is not None
    again = student_client.get(PAGE).content.decode()
    assert "laptop CLI" in again
    assert secret not in again


def test_a_token_without_expiry_never_expires(student_client, student):
    student_client.post(PAGE, {"name": "server", "expires_in_days": ""})
    assert AccessToken.objects.get(user=student).expires_at is None


def test_a_nameless_token_is_refused_with_the_reason(student_client):
    response = student_client.post(PAGE, {"name": "  ", "expires_in_days": "30"})
    assert response.status_code == 400
    assert "This field is required" in response.content.decode()
    assert not AccessToken.objects.exists()


def test_revoking_marks_it_revoked_and_writes_an_audit_record(student_client, student):
    student_client.post(PAGE, {"name": "old", "expires_in_days": "30"})
    token = AccessToken.objects.get()
    response = student_client.post(reverse("accounts:token_revoke", args=[token.pk]))
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.status == "revoked"
    actions = AuditEntry.objects.filter(target_type="accesstoken").values_list("action", flat=True)
    assert sorted(actions) == ["token.create", "token.revoke"]
    assert "revoked" in student_client.get(PAGE).content.decode()


def test_another_users_token_cannot_be_revoked(client, student, other_student):
    client.force_login(other_student)
    client.post(PAGE, {"name": "theirs", "expires_in_days": "30"})
    token = AccessToken.objects.get()
    client.force_login(student)
    assert client.post(reverse("accounts:token_revoke", args=[token.pk])).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_the_hourly_limit_is_explained_on_the_page(student_client, settings):
    settings.TOKENS_PER_HOUR = 1
    student_client.post(PAGE, {"name": "one", "expires_in_days": "30"})
    response = student_client.post(PAGE, {"name": "two", "expires_in_days": "30"})
    assert response.status_code == 400
    assert "try again later" in response.content.decode()
