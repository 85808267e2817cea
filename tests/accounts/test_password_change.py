"""A new password, by the reset e-mail or on the account page: every other session of the
user ends, and the form offers (checked) to revoke the user's API tokens, which otherwise
outlive it."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.urls import reverse

from accounts.models import AccessToken
from audit.models import AuditEntry
from tests.conftest import client_with_token

pytestmark = pytest.mark.django_db
OLD, NEW = "the-old-long-password", "a-brand-new-long-password"


@pytest.fixture
def ada(db):
    return get_user_model().objects.create_user("ada", email="ada@campus.example", password=OLD)


def signed_in(user) -> Client:
    """Another browser, signed in with the password as it is now."""
    browser = Client()
    answer = browser.post(reverse("login"), {"username": user.username, "password": OLD})
    assert answer.status_code == 302, answer.content.decode()[:500]
    return browser


def jobs_page(browser) -> int:
    return browser.get(reverse("jobs:list")).status_code


def reset_link(client, email) -> str:
    client.post(reverse("password_reset"), {"email": email})
    [message] = mail.outbox
    link = re.search(r"http://testserver(/accounts/password-reset/\S+/)", message.body)[1]
    return client.get(link)["Location"]  # Django swaps the token for a session-held one


def test_a_reset_signs_out_every_session_and_revokes_the_tokens(ada, client):
    elsewhere = signed_in(ada)
    api = client_with_token(ada)
    assert jobs_page(elsewhere) == 200 and api.get(reverse("api:job-list")).status_code == 200
    form_url = reset_link(client, ada.email)
    page = client.get(form_url).content.decode()
    assert "Also revoke my 1 API token" in page and "checked" in page
    done = client.post(
        form_url, {"new_password1": NEW, "new_password2": NEW, "revoke_tokens": "on"}
    )
    assert done.status_code == 302
    assert jobs_page(elsewhere) == 302  # signed out: to the login page
    assert api.get(reverse("api:job-list")).status_code == 401
    assert not AccessToken.objects.filter(user=ada, revoked_at__isnull=True).exists()
    entry = AuditEntry.objects.get(action="account.password_change")
    assert entry.detail == "1 API token revoked"


def test_tokens_are_kept_when_the_box_is_cleared(ada, client):
    api = client_with_token(ada)
    form_url = reset_link(client, ada.email)
    client.post(form_url, {"new_password1": NEW, "new_password2": NEW})
    assert api.get(reverse("api:job-list")).status_code == 200


def test_a_change_on_the_account_page_keeps_this_session_and_ends_the_others(ada):
    here, elsewhere = signed_in(ada), signed_in(ada)
    api = client_with_token(ada)
    assert "Change your password" in here.get(reverse("accounts:account")).content.decode()
    changed = here.post(
        reverse("password_change"),
        {
            "old_password": OLD,
            "new_password1": NEW,
            "new_password2": NEW,
            "revoke_tokens": "on",
        },
    )
    assert changed["Location"] == reverse("password_change_done")
    assert jobs_page(here) == 200
    assert jobs_page(elsewhere) == 302
    assert api.get(reverse("api:job-list")).status_code == 401
    wrong = here.post(
        reverse("password_change"),
        {
            "old_password": "not-it",
            "new_password1": OLD,
            "new_password2": OLD,
        },
    )
    assert wrong.status_code == 200 and "incorrectly" in wrong.content.decode()
