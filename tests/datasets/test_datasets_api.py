"""/api/v1/datasets/: a student imports a dataset by upload or shared path, follows the
import, shares it with a lab, and deletes it; who may see it follows its visibility."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from tests.conftest import client_with_token
from tests.datasets.files import SAMPLE, upload, write_tree, zip_of
from tests.factories import LabFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)
DATASETS = reverse("api:dataset-list")


@pytest.fixture(autouse=True)
def imports_run_here(fake_bridge):
    """The import task runs in place (the fake bridge's fixture makes Celery eager)."""


def push(api, name="cats", body=None, filename="data.zip", **fields):
    return api.post(
        DATASETS,
        {"name": name, "file": upload(body or zip_of(SAMPLE), filename), **fields},
        format="multipart",
    )


def test_an_upload_is_accepted_followed_and_becomes_a_version(api):
    response = push(api, description="Cats")
    assert response.status_code == 202, response.json()
    followed = api.get(reverse("api:dataset-import", args=[response.json()["id"]])).json()
    assert (followed["state"], followed["version"], followed["percent"]) == ("done", "cats@1", 100)
    body = api.get(reverse("api:dataset-detail", args=["cats"])).json()
    [version] = body["versions"]
    assert (body["owner"], body["visibility"], body["description"]) == (
        "student",
        "private",
        "Cats",
    )
    assert (version["file_count"], len(version["sha256"])) == (4, 64)
    tables = {t["path"]: t["rows"] for t in version["preview"]["tables"]}
    assert tables["train.csv"][0] == ["x", "y"]
    listed = api.get(DATASETS).json()["results"]
    assert [(d["name"], d["latest_version"]["reference"]) for d in listed] == [("cats", "cats@1")]


def test_a_hostile_archive_fails_visibly_and_no_dataset_appears(api):
    response = push(api, body=zip_of({"../../etc/passwd": "root"}))
    followed = api.get(reverse("api:dataset-import", args=[response.json()["id"]])).json()
    assert followed["state"] == "failed" and "'..' would reach outside" in followed["message"]
    assert api.get(DATASETS).json()["results"] == []


def test_bad_requests_name_their_field(api, settings, tmp_path):
    assert "name" in push(api, name="../x").json()["error"]["fields"]
    assert api.post(DATASETS, {"name": "x"}, format="json").status_code == 400
    settings.DATASET_ROOTS = [tmp_path / "shared"]
    outside = write_tree(tmp_path / "elsewhere", SAMPLE)
    refused = api.post(DATASETS, {"name": "x", "path": str(outside)}, format="json")
    assert refused.status_code == 400, refused.json()
    [message] = refused.json()["error"]["fields"]["path"]
    assert "outside the shared folders" in message


def test_a_shared_folder_is_registered_by_path(api, settings, tmp_path):
    settings.DATASET_ROOTS = [tmp_path / "shared"]
    folder = write_tree(tmp_path / "shared" / "mini", SAMPLE)
    response = api.post(DATASETS, {"name": "mini", "path": str(folder)}, format="json")
    assert response.status_code == 202, response.json()
    [version] = api.get(reverse("api:dataset-detail", args=["mini"])).json()["versions"]
    assert (version["source"], version["shared_path"]) == ("path", str(folder))


def test_visibility_decides_who_sees_a_dataset(api, student):
    vision, nlp = LabFactory(name="Vision"), LabFactory(name="NLP")
    MembershipFactory(lab=vision, user=student)
    assert push(api, name="private-cats").status_code == 202
    assert push(api, name="lab-cats", visibility="lab", lab="Vision").status_code == 202
    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    people = {
        "owner": student,
        "lab member": MembershipFactory(lab=vision).user,
        "lead": MembershipFactory(lab=vision, role="lead").user,
        "other lab": MembershipFactory(lab=nlp).user,
        "admin": admin,
    }
    seen = {}
    for role, user in people.items():
        client = client_with_token(user)
        seen[role] = sorted(d["name"] for d in client.get(DATASETS).json()["results"])
        for name in ("private-cats", "lab-cats"):
            status = client.get(reverse("api:dataset-detail", args=[name])).status_code
            assert status == (200 if name in seen[role] else 404), (role, name)
    assert seen == {
        "owner": ["lab-cats", "private-cats"],
        "lab member": ["lab-cats"],
        "lead": ["lab-cats"],
        "other lab": [],
        "admin": ["lab-cats", "private-cats"],
    }
    from rest_framework.test import APIClient

    assert APIClient().get(DATASETS).status_code == 401


def test_only_the_owner_or_an_admin_deletes(api, student):
    vision = LabFactory(name="Vision")
    MembershipFactory(lab=vision, user=student)
    push(api, name="lab-cats", visibility="lab", lab="Vision")
    member = client_with_token(MembershipFactory(lab=vision, user=UserFactory()).user)
    detail = reverse("api:dataset-detail", args=["lab-cats"])
    assert member.delete(detail).status_code == 403
    assert api.delete(detail).status_code == 204
    assert api.get(detail).status_code == 404


def test_a_versions_archive_downloads_with_its_checksum_and_a_lost_one_is_a_404(api):
    push(api)
    archive = reverse("api:dataset-archive", args=["cats", 1])
    response = api.get(archive)
    body = b"".join(response.streaming_content)
    import hashlib

    assert response["X-Checksum-Sha256"] == hashlib.sha256(body).hexdigest()
    from datasets import storage

    storage.archive_path(response["X-Checksum-Sha256"]).unlink()
    gone = api.get(archive)
    assert gone.status_code == 404 and "no longer stored" in gone.json()["error"]["message"]
