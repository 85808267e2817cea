import json

import pytest

pytestmark = pytest.mark.django_db


def test_healthz_reports_each_dependency_and_fails_when_the_schedd_is_down(client, fake_bridge):
    fake_bridge.down = True
    response = client.get("/healthz")
    body = json.loads(response.content)
    assert response.status_code == 503
    assert body["checks"]["database"] == {"ok": True}
    assert body["checks"]["redis"] == {"ok": True}
    assert body["checks"]["schedd"]["ok"] is False
    assert "Failed to connect" in body["checks"]["schedd"]["error"]
    assert set(body["checks"]) == {"database", "redis", "celery", "schedd"}
