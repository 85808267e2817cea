"""Every failure answers in one JSON shape; malformed input is a 400, never a 500."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    return error


def test_malformed_json_is_a_400(api, fake_bridge):
    response = api.generic(
        "POST", reverse("api:job-list"), '{"name": "x",', content_type="application/json"
    )
    assert_error(response, 400, "malformed_request")


def test_an_oversized_json_body_is_a_400_not_a_500(api, fake_bridge):
    body = '{"name": "' + "x" * 3_000_000 + '"}'
    response = api.generic("POST", reverse("api:match"), body, content_type="application/json")
    assert_error(response, 400, "malformed_request")


def test_too_many_multipart_fields_is_a_400(api, fake_bridge):
    fields = {"name": "x", "gpus": 0, "arguments": [str(i) for i in range(1200)]}
    assert_error(
        api.post(reverse("api:job-list"), fields, format="multipart"), 400, "malformed_request"
    )


def test_a_json_list_instead_of_an_object_is_a_400(api, fake_bridge):
    response = api.post(reverse("api:match"), [1, 2], format="json")
    assert_error(response, 400, "invalid")


def test_a_wrong_content_type_is_a_415(api):
    response = api.generic("POST", reverse("api:match"), "gpus=1", content_type="text/csv")
    assert_error(response, 415, "unsupported_media_type")


def test_an_unknown_api_url_is_a_json_404(api):
    assert_error(api.get("/api/v1/nothing/here/"), 404, "not_found")
    assert_error(api.get("/api/v1/jobs/not-a-uuid/"), 404, "not_found")


def test_an_unknown_url_answers_404_to_any_method_even_without_csrf(student):
    from rest_framework.test import APIClient

    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(student)
    assert_error(browser.delete("/api/v1/tokens/-1/"), 404, "not_found")


def test_a_wrong_method_is_a_405(api):
    assert_error(api.delete(reverse("api:me")), 405, "method_not_allowed")


def test_a_validation_error_names_each_field(api, fake_bridge):
    response = api.post(reverse("api:match"), {"gpus": -1, "cpus": "many"}, format="json")
    error = assert_error(response, 400, "invalid")
    assert set(error["fields"]) == {"gpus", "cpus"}


def test_a_page_past_the_end_is_a_404(api):
    assert_error(api.get(reverse("api:job-list"), {"page": 99}), 404, "not_found")


def test_an_unexpected_failure_is_a_json_500_and_is_logged(api, monkeypatch, caplog):
    from jobs.api import views

    def broken(user):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(views.selectors, "job_list_visible_to", broken)
    response = api.get(reverse("api:job-list"))
    error = assert_error(response, 500, "server_error")
    assert "disk on fire" not in error["message"]
    assert "disk on fire" in caplog.text


def test_the_pool_being_down_makes_match_a_503(api, fake_bridge):
    fake_bridge.down = True
    response = api.post(reverse("api:match"), {"gpus": 1}, format="json")
    assert_error(response, 503, "pool_unavailable")


@pytest.mark.parametrize(
    "path", ["/api/v1/reports/a%0Ab.csv", "/api/v1/no%0Asuch/", "/api/v1/x%0A"]
)
def test_an_api_path_with_a_line_break_is_a_json_404(api, path):
    response = api.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
