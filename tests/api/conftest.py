import pytest
from rest_framework.test import APIClient

from accounts import services as account_services


def client_with_token(user) -> APIClient:
    client = APIClient()
    secret = account_services.token_create(user=user, name="tests").secret
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def api(student):
    """The API as the student, through a personal access token."""
    return client_with_token(student)


@pytest.fixture
def other_api(other_student):
    return client_with_token(other_student)


@pytest.fixture
def anonymous_api():
    return APIClient()
