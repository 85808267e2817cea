"""Who sees a model version, on the web and through the API: private to its publisher, lab
to the lab's members, site to everyone signed in; staff see all. What one may not see is
answered as if it did not exist."""

import pytest
from django.urls import reverse

from model_registry.models import ModelVersion
from tests.model_registry.conftest import MODELS, published

pytestmark = pytest.mark.django_db(transaction=True)

# visibility -> who may see it (the lab's lead always publishes here, so leads are readers).
MATRIX = {
    "private": {"sam"},
    "lab": {"sam", "kim", "lead"},
    "site": {"sam", "kim", "lead", "olga"},
}


@pytest.fixture
def versions(people, finished_job):
    made = {}
    for visibility in MATRIX:
        publisher = people.lead if visibility == "site" else people.student
        job = finished_job(publisher, lab=people.lab.name)
        made[visibility] = published(publisher, job, name=f"m-{visibility}", visibility=visibility)
    # The site version's publisher is the lead: the matrix reads "who besides".
    return made


def readers(people):
    return {
        "sam": people.student,
        "kim": people.labmate,
        "lead": people.lead,
        "olga": people.outsider,
    }


@pytest.mark.parametrize("visibility", list(MATRIX))
def test_the_api_shows_a_version_only_to_those_it_is_for(people, versions, visibility):
    version = versions[visibility]
    for name, user in readers(people).items():
        api = people.api(user)
        allowed = name in MATRIX[visibility] or (visibility == "private" and False)
        listed = [v["reference"] for v in api.get(MODELS).json()["results"]]
        detail = api.get(reverse("api:model-version", args=["vision_robotics", version["name"], 1]))
        archive = api.get(
            reverse("api:model-archive", args=["vision_robotics", version["name"], 1])
        )
        assert (version["reference"] in listed) is allowed, (name, listed)
        assert detail.status_code == (200 if allowed else 404), name
        assert archive.status_code == (200 if allowed else 404), name
        if not allowed:
            assert detail.json()["error"]["message"].startswith("No model")


@pytest.mark.parametrize("visibility", list(MATRIX))
def test_the_pages_show_a_version_only_to_those_it_is_for(people, versions, visibility, client):
    version = ModelVersion.objects.get(model__name=f"m-{visibility}")
    for name, user in readers(people).items():
        client.force_login(user)
        allowed = name in MATRIX[visibility]
        catalogue = client.get(reverse("models:list")).content.decode()
        lab_page = client.get(reverse("models:lab", args=["vision_robotics"])).content.decode()
        page = client.get(reverse("models:version", args=[version.pk]))
        download = client.get(reverse("models:archive", args=[version.pk]))
        assert (f'data-reference="{version.reference}"' in catalogue) is allowed, name
        assert (f'data-reference="{version.reference}"' in lab_page) is allowed, name
        assert page.status_code == (200 if allowed else 404), name
        assert download.status_code == (200 if allowed else 404), name


def test_staff_see_every_version(people, versions, admin_client):
    catalogue = admin_client.get(reverse("models:list")).content.decode()
    for version in ModelVersion.objects.all():
        assert f'data-reference="{version.reference}"' in catalogue


def test_a_job_may_use_only_a_model_its_owner_may_see(people, versions):
    from tests.conftest import script_upload

    jobs = reverse("api:job-list")
    for reference, user, allowed in [
        ("vision_robotics/m-private", people.labmate, False),
        ("vision_robotics/m-lab", people.labmate, True),
        ("vision_robotics/m-lab@1", people.outsider, False),
        ("vision_robotics/m-site", people.outsider, True),
    ]:
        response = people.api(user).post(
            jobs,
            {"name": "reader", "gpus": 0, "script": script_upload(), "models": [reference]},
            format="multipart",
        )
        if allowed:
            assert response.status_code == 201, response.json()
        else:
            assert response.json()["error"]["fields"]["models"] == [
                f"There is no model {reference} that you may use; the models page lists "
                "yours, your labs' and the site's."
            ]


def test_the_catalogue_costs_the_same_queries_for_two_models_and_for_twelve(
    people, finished_job, client
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    job = finished_job(people.student, lab=people.lab.name)
    client.force_login(people.labmate)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse("models:list")).status_code == 200
            assert people.api(people.labmate).get(MODELS).json()["count"] > 0
        return len(captured)

    for number in range(2):
        published(people.student, job, name=f"few-{number}")
    few = queries()
    for number in range(10):
        published(people.student, job, name=f"many-{number}")
    assert queries() == few
