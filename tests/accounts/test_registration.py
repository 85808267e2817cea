"""Self-registration (open, approval, closed), approval by a lab lead, and password reset."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.urls import reverse

from accounts.models import Registration
from audit.models import AuditEntry
from jobs.models import Job
from labs.models import Membership
from tests.conftest import client_with_token, script_upload
from tests.factories import LabFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db
REGISTER = reverse("accounts:register")


def register(client, lab=None, username="newbie"):
    return client.post(
        REGISTER,
        {
            "username": username,
            "email": f"{username}@example.org",
            "lab": lab.pk if lab else "",
            "password1": "Correct-Horse-42",
            "password2": "Correct-Horse-42",
            "note": "resnets",
        },
    )


def submit(client):
    return client.post(
        reverse("jobs:new"),
        {
            "name": "first",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 1,
            "script": script_upload(),
        },
    )


@pytest.fixture
def vision(fake_bridge):
    lab = LabFactory(name="Vision")
    lead = UserFactory(username="lead", email="lead@example.org")
    MembershipFactory(lab=lab, user=lead, role="lead")
    return lab


def test_with_approval_a_new_account_signs_in_but_waits_to_submit(
    client, vision, settings, django_capture_on_commit_callbacks
):
    settings.REGISTRATION_MODE = "approval"
    with django_capture_on_commit_callbacks(execute=True):
        response = register(client, vision)
    assert response.status_code == 302
    assert "waits for approval" in client.get(reverse("accounts:account")).content.decode()
    refused = submit(client)
    assert refused.status_code == 400
    assert "waits for approval by a lab lead" in refused.content.decode()
    assert not Job.objects.exists()
    (email,) = mail.outbox
    assert email.to == ["lead@example.org"]
    assert "newbie asks for an account" in email.subject


def test_the_api_refuses_a_waiting_account_with_its_own_code(vision, settings, client):
    settings.REGISTRATION_MODE = "approval"
    register(client, vision)
    api = client_with_token(get_user_model().objects.get(username="newbie"))
    data = {"name": "x", "gpus": 0, "script": script_upload()}
    response = api.post(reverse("api:job-list"), data, format="multipart")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "account_pending"


def test_the_labs_lead_approves_and_the_user_joins_the_lab(client, vision, settings):
    settings.REGISTRATION_MODE = "approval"
    register(client, vision)
    newbie = get_user_model().objects.get(username="newbie")
    lead = get_user_model().objects.get(username="lead")
    client.force_login(lead)
    page = client.get(reverse("accounts:approvals")).content.decode()
    assert "newbie" in page and "resnets" in page
    registration = Registration.objects.get()
    client.post(reverse("accounts:approvals"), {"registration": registration.pk})
    registration.refresh_from_db()
    assert registration.approved_by == lead
    assert Membership.objects.filter(lab=vision, user=newbie, role="member").exists()
    assert mail.outbox[-1].to == ["newbie@example.org"]
    assert AuditEntry.objects.filter(action="account.approve", actor=lead).exists()
    client.force_login(newbie)
    assert submit(client).status_code == 302


def test_a_lead_of_another_lab_cannot_approve(client, vision, settings):
    settings.REGISTRATION_MODE = "approval"
    register(client, vision)
    other = MembershipFactory(lab=LabFactory(name="NLP"), role="lead").user
    client.force_login(other)
    assert "newbie" not in client.get(reverse("accounts:approvals")).content.decode()
    response = client.post(
        reverse("accounts:approvals"), {"registration": Registration.objects.get().pk}
    )
    assert response.status_code == 404
    assert not Registration.objects.get().is_approved


def test_open_registration_lets_the_user_submit_at_once(client, vision, settings):
    settings.REGISTRATION_MODE = "open"
    register(client, vision)
    assert submit(client).status_code == 302
    assert Job.objects.get().lab == vision


def test_closed_registration_says_so_and_makes_no_account(client, settings):
    settings.REGISTRATION_MODE = "closed"
    assert client.get(REGISTER).status_code == 404
    assert register(client).status_code == 404
    assert not get_user_model().objects.filter(username="newbie").exists()
    assert "Create an account" not in client.get(reverse("login")).content.decode()


def test_a_weak_password_or_taken_name_is_refused_with_the_reason(client, settings, student):
    settings.REGISTRATION_MODE = "open"
    response = client.post(
        REGISTER,
        {"username": "student", "email": "x@example.org", "password1": "123", "password2": "123"},
    )
    body = response.content.decode()
    assert response.status_code == 400
    assert "A user with that username already exists." in body
    assert "This password is too short" in body


def test_accounts_made_by_admins_need_no_approval(student_client, fake_bridge):
    assert submit(student_client).status_code == 302


def test_a_forgotten_password_is_reset_by_email(client, student):
    client.post(reverse("password_reset"), {"email": student.email})
    (email,) = mail.outbox
    link = re.search(r"http://testserver(/accounts/password-reset/\S+/)", email.body).group(1)
    form = client.get(link, follow=True)
    assert "Choose a new password" in form.content.decode()
    new = {"new_password1": "Brand-New-Pass-77", "new_password2": "Brand-New-Pass-77"}
    done = client.post(form.redirect_chain[-1][0], new)
    assert done.status_code == 302
    signed_in = client.post(
        reverse("login"), {"username": "student", "password": "Brand-New-Pass-77"}
    )
    assert signed_in.status_code == 302


def test_what_a_newcomer_types_is_shown_to_the_lead_as_text(client, vision, settings):
    settings.REGISTRATION_MODE = "approval"
    client.post(
        REGISTER,
        {
            "username": "newbie",
            "email": "newbie@example.org",
            "lab": vision.pk,
            "password1": "Correct-Horse-42",
            "password2": "Correct-Horse-42",
            "note": "<script>alert(1)</script>\u202egnp.exe",
        },
    )
    client.force_login(get_user_model().objects.get(username="lead"))
    page = client.get(reverse("accounts:approvals")).content.decode()
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize("username", ["../admin", "a b", "x" * 151, "evil\x00"])
def test_a_hostile_username_is_refused(client, settings, username):
    settings.REGISTRATION_MODE = "open"
    response = register(client, username=username)
    assert response.status_code == 400
    assert not get_user_model().objects.exists()
