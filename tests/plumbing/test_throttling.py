"""Submissions and token creation are rate-limited, with the limits taken from settings."""

import pytest
from django.urls import reverse

from accounts import services
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db


def test_submissions_beyond_the_limit_get_a_429_that_says_when_to_retry(api, settings, fake_bridge):
    settings.API_THROTTLE_RATES = {**settings.API_THROTTLE_RATES, "submissions": "2/minute"}
    statuses = [
        api.post(
            reverse("api:job-list"),
            {"name": f"j{i}", "gpus": 0, "script": script_upload()},
            format="multipart",
        ).status_code
        for i in range(3)
    ]
    assert statuses == [201, 201, 429]
    response = api.post(reverse("api:job-list"), {"name": "x"}, format="multipart")
    assert response.json()["error"]["code"] == "throttled"
    assert "try again in" in response.json()["error"]["message"]
    assert int(response["Retry-After"]) > 0


def test_reading_is_not_limited_by_the_submission_limit(api, settings):
    settings.API_THROTTLE_RATES = {**settings.API_THROTTLE_RATES, "submissions": "1/minute"}
    assert all(api.get(reverse("api:job-list")).status_code == 200 for _ in range(5))


def test_one_user_hitting_the_limit_does_not_stop_another(api, other_api, settings, fake_bridge):
    settings.API_THROTTLE_RATES = {**settings.API_THROTTLE_RATES, "tokens": "1/minute"}
    assert api.post(reverse("api:token-list"), {"name": "a"}, format="json").status_code == 201
    assert api.post(reverse("api:token-list"), {"name": "b"}, format="json").status_code == 429
    assert (
        other_api.post(reverse("api:token-list"), {"name": "a"}, format="json").status_code == 201
    )


def test_tokens_per_hour_hold_on_the_web_page_and_the_api_alike(api, student, settings):
    settings.TOKENS_PER_HOUR = 2  # the fixture's token is the first
    assert api.post(reverse("api:token-list"), {"name": "b"}, format="json").status_code == 201
    refused = api.post(reverse("api:token-list"), {"name": "c"}, format="json")
    assert refused.status_code == 429
    assert "2 tokens in the last hour" in refused.json()["error"]["message"]
    with pytest.raises(services.TokenError):
        services.token_create(user=student, name="web")
