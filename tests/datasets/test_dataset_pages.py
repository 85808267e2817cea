"""The datasets pages: a student uploads a folder's archive through the form, watches the
import, and sees the dataset's files, first rows and thumbnails; a failed import says why."""

import pytest
from django.urls import reverse

from tests.datasets.files import SAMPLE, upload, write_tree, zip_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def imports_run_here(fake_bridge):
    """The import task runs in place (the fake bridge's fixture makes Celery eager)."""


def submit(client, body, **fields):
    return client.post(
        reverse("datasets:new"),
        {
            "name": "cats",
            "description": "Cats and dogs",
            "visibility": "private",
            "file": upload(body),
            **fields,
        },
        follow=True,
    )


def test_an_upload_through_the_form_ends_on_the_datasets_page_with_its_preview(student_client):
    page = submit(student_client, zip_of(SAMPLE)).content.decode()
    assert "Version 1: 4 files, sha256" in page
    assert 'data-role="thumbnails"' in page and "<td>cat</td>" not in page
    assert "<td>x</td><td>y</td>" in page and "images/dog.png" in page
    dataset_url = student_client.get(reverse("datasets:list")).content.decode()
    assert "cats" in dataset_url and "4 files" in dataset_url


def test_a_thumbnail_is_a_png_for_those_who_may_see_the_dataset(
    student_client, client, other_student
):
    submit(student_client, zip_of(SAMPLE))
    from datasets.models import Dataset

    dataset = Dataset.objects.get()
    url = reverse("datasets:thumbnail", args=[dataset.pk, 1, 1])
    response = student_client.get(url)
    assert response["Content-Type"] == "image/png"
    assert b"".join(response.streaming_content).startswith(b"\x89PNG")
    assert (
        student_client.get(reverse("datasets:thumbnail", args=[dataset.pk, 1, 9])).status_code
        == 404
    )
    client.force_login(other_student)
    assert client.get(url).status_code == 404


def test_a_failed_import_says_why_and_keeps_nothing(student_client):
    page = submit(student_client, zip_of({"a/../../b.txt": "x"})).content.decode()
    assert 'data-role="import-error"' in page and "would reach outside" in page
    assert 'data-role="empty"' in student_client.get(reverse("datasets:list")).content.decode()


def test_a_bad_name_is_shown_beside_the_field(student_client):
    response = student_client.post(
        reverse("datasets:new"),
        {
            "name": "no/slashes",
            "visibility": "private",
            "file": upload(b"x", "a.txt"),
        },
    )
    assert response.status_code == 400
    assert "Use letters, digits and . _ -" in response.content.decode()


def test_the_shared_folder_field_appears_only_where_the_site_has_one(
    student_client, settings, tmp_path
):
    assert 'name="path"' not in student_client.get(reverse("datasets:new")).content.decode()
    settings.DATASET_ROOTS = [tmp_path / "shared"]
    folder = write_tree(tmp_path / "shared" / "mini", SAMPLE)
    page = student_client.post(
        reverse("datasets:new"),
        {
            "name": "mini",
            "visibility": "private",
            "path": str(folder),
        },
        follow=True,
    ).content.decode()
    assert "linked into jobs" in page and str(folder) in page


def test_the_owner_deletes_a_dataset(student_client):
    submit(student_client, zip_of(SAMPLE))
    from datasets.models import Dataset

    dataset = Dataset.objects.get()
    response = student_client.post(reverse("datasets:delete", args=[dataset.pk]), follow=True)
    assert "cats is deleted." in response.content.decode()
    assert not Dataset.objects.exists()
