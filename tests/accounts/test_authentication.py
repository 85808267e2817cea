"""Bearer tokens and browser sessions; expired, revoked and mistyped tokens are refused."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from accounts import services
from accounts.models import AccessToken
from audit.models import AuditEntry

pytestmark = pytest.mark.django_db
ME = reverse("api:me")


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_a_token_authenticates_as_its_owner_and_records_its_use(student):
    new = services.token_create(user=student, name="laptop")
    assert bearer(new.secret).get(ME).json()["username"] == "student"
    new.token.refresh_from_db()
    assert new.token.last_used_at is not None


def test_only_a_hash_of_the_token_is_stored(student):
    new = services.token_create(user=student, name="laptop")
    stored = AccessToken.objects.get()
    assert new.secret not in (stored.digest, stored.prefix, stored.name)
    assert stored.digest == services.token_digest(new.secret)
    assert new.secret.startswith(stored.prefix)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda s: s + "x",
        lambda s: s[:-1],
        lambda s: "nst_" + "A" * 43,
        lambda s: "nope",
        lambda s: s + " extra",
        lambda s: "é" * 10,
    ],
)
def test_a_mistyped_token_is_a_401(student, mangle):
    new = services.token_create(user=student, name="laptop")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {mangle(new.secret)}")
    response = client.get(ME)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_a_revoked_token_stops_working(student):
    new = services.token_create(user=student, name="laptop")
    services.token_revoke(token=new.token, actor=student)
    assert bearer(new.secret).get(ME).status_code == 401
    assert AuditEntry.objects.filter(action="token.revoke", actor=student).exists()


def test_an_expired_token_stops_working(student):
    new = services.token_create(user=student, name="laptop", expires_in_days=1)
    AccessToken.objects.filter(pk=new.token.pk).update(expires_at=timezone.now() - timedelta(1))
    assert bearer(new.secret).get(ME).status_code == 401


def test_a_deactivated_users_token_stops_working(student):
    new = services.token_create(user=student, name="laptop")
    student.is_active = False
    student.save()
    assert bearer(new.secret).get(ME).status_code == 401


def test_a_browser_session_works_and_needs_csrf_to_change_things(student, fake_bridge):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(student)
    assert client.get(ME).status_code == 200
    response = client.post(reverse("api:match"), {"gpus": 0}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]["message"]
