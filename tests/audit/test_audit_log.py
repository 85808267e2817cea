"""The audit log: every state-changing action, with who, what, which object, when and where."""

import pytest
from django.urls import reverse

from audit.models import AuditEntry
from jobs import specs, submission
from jobs.models import Job
from labs.models import Lab, Membership
from tests.conftest import script_upload
from tests.factories import LabFactory, UserFactory

pytestmark = pytest.mark.django_db


def entries(action: str):
    return list(AuditEntry.objects.filter(action=action))


def test_a_web_submission_and_cancel_are_logged_with_the_address(student_client, fake_bridge):
    student_client.post(
        reverse("jobs:new"),
        {
            "name": "mnist",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 1,
            "script": script_upload(),
        },
        REMOTE_ADDR="10.1.2.3",
    )
    job = Job.objects.get()
    student_client.post(reverse("jobs:cancel", args=[job.public_id]), REMOTE_ADDR="10.1.2.3")
    (submitted,) = entries("job.submit")
    assert (submitted.actor_name, submitted.ip, submitted.via) == ("student", "10.1.2.3", "web")
    assert (submitted.target_type, submitted.target_id) == ("job", str(job.public_id))
    assert entries("job.cancel")[0].target_label.startswith("mnist")


def test_an_api_action_names_the_token_used(api, student, fake_bridge):
    api.post(
        reverse("api:job-list"),
        {"name": "x", "gpus": 0, "script": script_upload()},
        format="multipart",
    )
    (submitted,) = entries("job.submit")
    assert submitted.via == "api"
    assert submitted.token_prefix == student.access_tokens.get().prefix


def test_the_forwarded_address_is_believed_only_behind_a_trusted_proxy(
    student_client, fake_bridge, settings
):
    def submit():
        student_client.post(
            reverse("jobs:new"),
            {
                "name": "x",
                "gpus": 0,
                "cpus": 1,
                "memory_gb": 1,
                "script": script_upload(),
            },
            REMOTE_ADDR="127.0.0.1",
            HTTP_X_FORWARDED_FOR="6.6.6.6, 192.0.2.7",
        )

    submit()
    settings.TRUSTED_PROXY_COUNT = 1
    submit()
    assert [e.ip for e in AuditEntry.objects.filter(action="job.submit").order_by("at", "id")] == [
        "127.0.0.1",
        "192.0.2.7",
    ]


@pytest.mark.parametrize("forwarded", ["not-an-address", "1.2.3.4'; DROP TABLE x", "\u202e1.1.1.1"])
def test_a_forged_forwarded_address_is_never_recorded(
    student_client, fake_bridge, settings, forwarded
):
    settings.TRUSTED_PROXY_COUNT = 2  # one more than there really is: the client's value counts
    response = student_client.post(
        reverse("jobs:new"),
        {
            "name": "x",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 1,
            "script": script_upload(),
        },
        REMOTE_ADDR="127.0.0.1",
        HTTP_X_FORWARDED_FOR=f"{forwarded}, 192.0.2.7",
    )
    assert response.status_code == 302
    assert AuditEntry.objects.get(action="job.submit").ip == "127.0.0.1"


def test_sign_ins_and_failed_sign_ins_are_logged(client, student):
    client.post(reverse("login"), {"username": "student", "password": "wrong"})
    client.post(reverse("login"), {"username": "student", "password": "a-long-test-password"})
    assert entries("login.failed")[0].target_label == "student"
    assert entries("login")[0].actor_name == "student"


def test_quota_and_membership_changes_in_the_admin_are_logged(admin_client):
    lab = LabFactory(name="Vision", gpu_hours=10)
    ada = UserFactory(username="ada")
    url = reverse("admin:labs_lab_change", args=[lab.pk])
    response = admin_client.post(
        url,
        {
            "name": "Vision",
            "accounting_group": "group_vision",
            "gpu_hours": 20,
            "gpu_hours_period_days": 7,
            "memberships-TOTAL_FORMS": 1,
            "memberships-INITIAL_FORMS": 0,
            "memberships-0-user": ada.pk,
            "memberships-0-role": "lead",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    (changed,) = entries("lab.change")
    assert "GPU-hours per period: 20.0" in changed.detail
    assert changed.via == "admin"
    (added,) = entries("membership.add")
    assert added.target_label == "ada in Vision"
    membership = Membership.objects.get()
    admin_client.post(
        reverse("admin:labs_membership_delete", args=[membership.pk]), {"post": "yes"}
    )
    assert entries("membership.remove")[0].actor_name == "root"
    assert Lab.objects.get().gpu_hours == 20


def test_the_log_can_be_read_and_filtered_but_not_edited(admin_client, student, fake_bridge):
    submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    entry = AuditEntry.objects.get(action="job.submit")
    listing = admin_client.get(
        reverse("admin:audit_auditentry_changelist"), {"action": "job.submit"}
    )
    assert "job.submit" in listing.content.decode()
    change = admin_client.get(reverse("admin:audit_auditentry_change", args=[entry.pk]))
    assert 'name="_save"' not in change.content.decode()
    assert (
        admin_client.post(
            reverse("admin:audit_auditentry_delete", args=[entry.pk]), {"post": "yes"}
        ).status_code
        == 403
    )
    assert AuditEntry.objects.filter(pk=entry.pk).exists()
