"""Who may read and who may act on a job, on the web and through the API.

A student sees their own jobs; a lab lead also reads (only reads) their labs' jobs; staff
read and act on every job; anyone else gets a 404, as for a job that does not exist.
"""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from jobs import specs, submission
from tests.conftest import client_with_token, script_upload
from tests.factories import LabFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

WEB_READ = ["jobs:detail", "jobs:status", "jobs:metrics", "jobs:metrics_csv", "jobs:outputs_zip"]
API_READ = [
    "api:job-detail",
    "api:job-events",
    "api:job-outputs",
    "api:job-metrics",
    "api:job-outputs-zip",
]
WEB_ACT = ["jobs:cancel"]
API_ACT = ["api:job-cancel"]

# role -> (reads, acts): the status for reading, and for cancelling.
EXPECTED = {
    "owner": (200, "done"),
    "lead of the lab": (200, 403),
    "lead of another lab": (404, 404),
    "member of the lab": (404, 404),
    "staff": (200, "done"),
}


@pytest.fixture
def world(fake_bridge):
    vision, nlp = LabFactory(name="Vision"), LabFactory(name="NLP")
    owner = MembershipFactory(lab=vision, user=UserFactory(username="owner")).user
    users = {
        "owner": owner,
        "lead of the lab": MembershipFactory(lab=vision, role="lead").user,
        "lead of another lab": MembershipFactory(lab=nlp, role="lead").user,
        "member of the lab": MembershipFactory(lab=vision).user,
        "staff": get_user_model().objects.create_user("operator", is_staff=True),
    }
    job = submission.job_submit(
        user=owner, spec=specs.JobSpec(name="vision job"), script=script_upload()
    )
    return users, job


def web_client(client, user):
    client.force_login(user)
    return client


@pytest.mark.parametrize("role", EXPECTED)
def test_reading_on_the_web(client, world, role):
    users, job = world
    web = web_client(client, users[role])
    for name in WEB_READ:
        assert web.get(reverse(name, args=[job.public_id])).status_code == EXPECTED[role][0], name


@pytest.mark.parametrize("role", EXPECTED)
def test_reading_through_the_api(world, role):
    users, job = world
    api = client_with_token(users[role])
    for name in API_READ:
        assert api.get(reverse(name, args=[job.public_id])).status_code == EXPECTED[role][0], name


@pytest.mark.parametrize("role", EXPECTED)
def test_cancelling_on_the_web_and_through_the_api(client, world, role):
    users, job = world
    expected = EXPECTED[role][1]
    web = web_client(client, users[role])
    response = web.post(reverse("jobs:cancel", args=[job.public_id]))
    assert response.status_code == (302 if expected == "done" else expected)
    api = client_with_token(users[role])
    response = api.post(reverse("api:job-cancel", args=[job.public_id]))
    # The web cancel already ended the job: the API then says it cannot (409).
    assert response.status_code == (409 if expected == "done" else expected)
    job.refresh_from_db()
    assert job.is_final == (expected == "done")


def test_a_lead_lists_their_labs_jobs_only_when_asked(world):
    users, job = world
    lead = client_with_token(users["lead of the lab"])
    assert lead.get(reverse("api:job-list")).json()["count"] == 0
    listed = lead.get(reverse("api:job-list"), {"scope": "visible"}).json()
    assert [(j["name"], j["owner"], j["lab"]) for j in listed["results"]] == [
        ("vision job", "owner", "Vision")
    ]
    other = client_with_token(users["lead of another lab"])
    assert other.get(reverse("api:job-list"), {"scope": "visible"}).json()["count"] == 0


def test_the_web_list_offers_labs_jobs_to_a_lead(client, world):
    users, job = world
    lead = web_client(client, users["lead of the lab"])
    page = lead.get(reverse("jobs:list"), {"scope": "visible"}).content.decode()
    assert "vision job" in page and "by owner (Vision)" in page
    assert "Whose jobs" in page
    client.force_login(users["member of the lab"])
    assert "Whose jobs" not in client.get(reverse("jobs:list")).content.decode()


def test_a_lead_sees_no_action_buttons_on_a_members_job(client, world):
    users, job = world
    page = web_client(client, users["lead of the lab"]).get(
        reverse("jobs:detail", args=[job.public_id])
    )
    body = page.content.decode()
    assert "Cancel job" not in body and "Clone" not in body
