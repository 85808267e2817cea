"""The admin's old addresses of sweeps (before they moved to experiments) lead to the new
ones, and whatever follows the old prefix stays a path on this site."""

import pytest
from django.urls import reverse


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("/admin/jobs/sweep/", "/admin/experiments/sweep/"),
        ("/admin/jobs/sweep/12/change/", "/admin/experiments/sweep/12/change/"),
        ("/admin/jobs/sweep/?q=lr&o=2", "/admin/experiments/sweep/?q=lr&o=2"),
        # Hostile: another host, a scheme. Each stays a path below the new prefix.
        ("/admin/jobs/sweep//evil.example/", "/admin/experiments/sweep//evil.example/"),
        ("/admin/jobs/sweep/https://evil.example", "/admin/experiments/sweep/https://evil.example"),
    ],
)
def test_an_old_sweep_admin_address_redirects_below_the_new_one(client, old, new):
    response = client.get(old)
    assert response.status_code == 301
    assert response["Location"] == new
    assert response["Location"].startswith(reverse("admin:index") + "experiments/sweep/")


def test_an_old_address_with_a_line_break_is_not_redirected_at_all(client):
    response = client.get("/admin/jobs/sweep/a%0d%0aSet-Cookie:x=1")
    assert response.status_code == 404
    assert "x" not in response.cookies
