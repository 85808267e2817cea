"""Repeated failed sign-ins lock that username out from that address for a while."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def sign_in(client, password: str, address: str = "10.0.0.1", username: str = "student"):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )


def test_the_sixth_try_is_refused_even_with_the_right_password(client, student, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert sign_in(client, "wrong").status_code == 200  # the form again, with an error
    locked = sign_in(client, "wrong")
    assert locked.status_code == 429
    assert "Too many failed sign-ins" in locked.content.decode()
    assert sign_in(client, "a-long-test-password").status_code == 429


def test_another_address_or_username_is_not_locked_out(client, student, other_student, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        sign_in(client, "wrong")
    assert sign_in(client, "a-long-test-password", address="10.0.0.2").status_code == 302
    client.logout()
    assert sign_in(client, "a-long-test-password", username="other").status_code == 302


def test_a_success_before_the_limit_starts_the_count_again(client, student, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        sign_in(client, "wrong")
    assert sign_in(client, "a-long-test-password").status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        sign_in(client, "wrong")
    assert sign_in(client, "a-long-test-password").status_code == 302


def test_the_apis_password_route_is_throttled_the_same_way(student, settings):
    api = APIClient(REMOTE_ADDR="10.0.0.9")
    url = reverse("api:password-token")
    body = {"username": "student", "password": "wrong", "name": "cli"}
    statuses = [
        api.post(url, body, format="json").status_code
        for _ in range(settings.AXES_FAILURE_LIMIT + 1)
    ]
    assert statuses[-1] == 429
    right = api.post(url, body | {"password": "a-long-test-password"}, format="json")
    assert right.status_code == 429
    assert "Too many failed sign-ins" in right.json()["error"]["message"]
