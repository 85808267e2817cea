"""A lab member makes an environment and a dataset under the names everyone else uses: a
bare name that several owners offer is refused, over the API and on the form, with the
qualified names to choose from, and nobody runs the member's by surprise. A user's own
name still means their own (nobody else can make it)."""

import pytest
from django.test import Client
from django.urls import reverse

from datasets.models import Dataset
from environments.models import Environment, EnvironmentVersion
from environments.services import environment_create
from jobs.models import Job
from tests.conftest import client_with_token, script_upload
from tests.datasets.files import SAMPLE, upload, zip_of
from tests.factories import LabFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)
JOBS = reverse("api:job-list")
PACKAGES = {"requirements": "tomli-w==1.2.0\n", "python_version": "3.13"}


@pytest.fixture
def lab(fake_bridge, student):
    lab = LabFactory(name="vision")
    MembershipFactory(lab=lab, user=student)
    return lab


@pytest.fixture
def mallory(lab):
    user = UserFactory(username="mallory")
    MembershipFactory(lab=lab, user=user)
    return user


def submit(api, **fields):
    return api.post(
        JOBS, {"name": "train", "gpus": 0, "script": script_upload(), **fields}, format="multipart"
    )


def environment_of(response) -> Environment:
    assert response.status_code == 201, response.json()
    job = Job.objects.get(public_id=response.json()["id"])
    return EnvironmentVersion.objects.get(pk=job.source["environment"]["id"]).environment


def refusal(response, field) -> str:
    assert response.status_code == 400, response.json()
    return " ".join(response.json()["error"]["fields"][field])


def test_a_lab_members_environment_never_stands_in_for_the_sites(api, student, lab, mallory):
    admin = UserFactory(username="root", is_staff=True)
    site = environment_create(user=admin, **PACKAGES, name="pytorch", visibility="site")
    assert environment_of(submit(api, software_environment="pytorch")) == site

    theirs = environment_create(user=mallory, **PACKAGES, name="pytorch", visibility="lab", lab=lab)
    message = refusal(submit(api, software_environment="pytorch"), "software_environment")
    assert "More than one environment called 'pytorch' is open to you" in message
    assert "mallory/pytorch or site/pytorch" in message
    assert environment_of(submit(api, software_environment="site/pytorch")) == site
    assert environment_of(submit(api, software_environment="site/pytorch@1")) == site
    assert environment_of(submit(api, software_environment="mallory/pytorch@1")) == theirs

    # The form offers each by its qualified name.
    browser = Client()
    browser.force_login(student)
    form = browser.get(reverse("jobs:new")).content.decode()
    assert 'value="site/pytorch@1"' in form and 'value="mallory/pytorch@1"' in form
    assert 'value="pytorch@1"' not in form

    # The API's address of an environment says whose where it must.
    detail = reverse("api:environment-detail", args=["pytorch"])
    assert api.get(detail).status_code == 409
    assert api.get(detail, {"owner": "site"}).json()["visibility"] == "site"

    # Their own is theirs: nobody else can make it.
    own = environment_create(user=student, **PACKAGES, name="pytorch")
    assert environment_of(submit(api, software_environment="pytorch")) == own
    assert environment_of(submit(api, software_environment="site/pytorch")) == site


def test_a_lab_members_dataset_never_stands_in_for_anothers(api, student, lab, mallory):
    def push(user, **fields):
        response = client_with_token(user).post(
            reverse("api:dataset-list"),
            {"name": "imagenet", "file": upload(zip_of(SAMPLE)), **fields},
            format="multipart",
        )
        assert response.status_code == 202, response.json()

    curator = UserFactory(username="curator", is_staff=True)
    push(curator, visibility="site")
    assert submit(api, datasets=["imagenet"]).status_code == 201
    push(mallory, visibility="lab", lab=lab.name)
    message = refusal(submit(api, datasets=["imagenet"]), "datasets")
    assert "curator/imagenet or mallory/imagenet" in message
    chosen = submit(api, datasets=["curator/imagenet@1"])
    assert chosen.status_code == 201, chosen.json()
    [record] = chosen.json()["reproducibility"]["datasets"]
    assert record["sha256"] == Dataset.objects.get(owner=curator).versions.get().sha256


@pytest.mark.parametrize("owner", ["../site", "$(id)", "site\nx", "' OR 1=1 --", "x" * 300])
def test_a_hostile_owner_in_an_address_finds_nothing(api, lab, owner):
    detail = reverse("api:environment-detail", args=["pytorch"])
    assert api.get(detail, {"owner": owner}).status_code == 404
    dataset = reverse("api:dataset-detail", args=["imagenet"])
    assert api.get(dataset, {"owner": owner}).status_code == 404
