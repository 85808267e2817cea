"""Resumable uploads (tus 1.0, through drf-tus) against the portal on a real socket, with a
real tus client (tuspy): a file over 2 GB arrives in chunks, the upload is cut off halfway
and a new client resumes it from the portal's offset; what is refused is refused before a
byte is sent; an upload never finished is removed after it expires."""

import hashlib
import os
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from django.urls import reverse
from django.utils import timezone
from tusclient import client as tus

from accounts import services as account_services
from datasets import storage
from datasets.models import Dataset, DatasetUpload
from datasets.services import dataset_imports_recover
from jobs.runtime import nightshift_data

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1024**3


@pytest.fixture
def portal(live_server, fake_bridge):
    return live_server


@pytest.fixture
def token(student):
    return account_services.token_create(user=student, name="tus").secret


def tus_client(portal, token) -> tus.TusClient:
    return tus.TusClient(
        f"{portal.url}/api/v1/dataset-uploads/", headers={"Authorization": f"Bearer {token}"}
    )


def big_file(path: Path, size: int) -> Path:
    """Mostly a hole (cheap to make), with distinct bytes at its ends and in its middle."""
    with open(path, "wb") as out:
        out.truncate(size)
        for where in (0, size // 2 - 4096, size - 4096):
            out.seek(where)
            out.write(hashlib.sha256(str(where).encode()).digest() * 128)
    return path


def status(portal, token, upload_id) -> dict:
    response = requests.get(
        f"{portal.url}/api/v1/dataset-uploads/{upload_id}/",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.timeout(600)
def test_a_file_over_2_gb_is_cut_off_halfway_and_resumed_by_a_new_client(
    portal, token, tmp_path, student
):
    size = 2 * GIB + 5 * 2**20
    source = big_file(tmp_path / "frames.bin", size)
    metadata = {"name": "frames", "filename": "frames.bin", "description": "video frames"}
    first = tus_client(portal, token).uploader(
        str(source), chunk_size=64 * 2**20, metadata=metadata
    )
    first.upload(stop_at=size // 2)  # then the connection is gone, and the client with it
    upload_id = first.url.rstrip("/").rsplit("/", 1)[-1]
    kept = status(portal, token, upload_id)
    assert (kept["offset"], kept["length"], kept["complete"]) == (first.offset, size, False)
    assert kept["offset"] >= size // 2

    second = tus_client(portal, token).uploader(str(source), chunk_size=64 * 2**20, url=first.url)
    assert second.offset == kept["offset"]  # asked the portal, and continues from there
    second.upload()
    done = status(portal, token, upload_id)
    assert done["complete"] and done["dataset_import"]
    follow = f"{portal.url}/api/v1/dataset-imports/{done['dataset_import']}/"
    imported = requests.get(follow, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    imported = imported.json()
    assert imported["state"] == "done", imported
    version = Dataset.objects.get(name="frames", owner=student).versions.get()
    assert (version.size_bytes, version.file_count) == (size, 1)
    tree = tmp_path / "tree"
    tree.mkdir()
    os.link(source, tree / "frames.bin")
    assert version.sha256 == nightshift_data.canonical_digest(str(tree))
    # The file moved into the import and on into the stored archive: no partial copy is left.
    assert DatasetUpload.objects.get().temporary_file_path is None
    assert not list(storage.uploads_dir().glob("*"))
    # pytest keeps the last runs' folders: not these gigabytes.
    storage.archive_path(version.sha256).unlink()
    source.unlink()


def create(portal, token, length, **metadata):
    import base64

    encoded = ",".join(
        f"{key} {base64.b64encode(str(value).encode()).decode()}" for key, value in metadata.items()
    )
    return requests.post(
        f"{portal.url}/api/v1/dataset-uploads/",
        timeout=30,
        headers={
            "Authorization": f"Bearer {token}",
            "Tus-Resumable": "1.0.0",
            "Upload-Length": str(length),
            "Upload-Metadata": encoded,
        },
    )


def test_what_cannot_be_kept_is_refused_before_a_byte_is_sent(portal, token, settings):
    bad_name = create(portal, token, 10, name="../up", filename="a.csv")
    assert bad_name.status_code == 400 and "letters, digits" in bad_name.text
    bad_file = create(portal, token, 10, name="ok", filename="\x01.csv")
    assert bad_file.status_code == 400 and "cannot be used" in bad_file.text
    settings.DATASET_MAX_GB = 1.0
    assert create(portal, token, 2 * GIB, name="ok", filename="a.csv").status_code == 413
    settings.DATASET_QUOTA_GB = 0.5
    over = create(portal, token, 600 * 10**6, name="ok", filename="a.csv")
    assert over.status_code == 403
    assert (
        "Your datasets and models may keep 0.50 GB on the portal" in over.json()["error"]["message"]
    )
    assert DatasetUpload.objects.count() == 0
    headers = {"Tus-Resumable": "1.0.0", "Upload-Length": "10"}
    anonymous = requests.post(f"{portal.url}/api/v1/dataset-uploads/", timeout=30, headers=headers)
    assert anonymous.status_code == 401


def test_only_its_owner_reaches_an_upload_and_a_damaged_chunk_is_refused(
    portal, token, other_student
):
    created = create(portal, token, 8, name="tiny", filename="a.csv")
    assert created.status_code == 201, created.text
    location = portal.url + created.headers["Location"]
    other = account_services.token_create(user=other_student, name="x").secret
    head = {"Tus-Resumable": "1.0.0"}
    assert (
        requests.head(
            location, headers={**head, "Authorization": f"Bearer {other}"}, timeout=30
        ).status_code
        == 404
    )
    patch = {
        **head,
        "Authorization": f"Bearer {token}",
        "Upload-Offset": "0",
        "Content-Type": "application/offset+octet-stream",
    }
    wrong = hashlib.sha256(b"other").digest()
    import base64

    damaged = requests.patch(
        location,
        data=b"a,b\n1,2\n",
        timeout=30,
        headers={**patch, "Upload-Checksum": f"sha256 {base64.b64encode(wrong).decode()}"},
    )
    assert damaged.status_code == 460
    assert (
        requests.head(
            location, headers={**head, "Authorization": f"Bearer {token}"}, timeout=30
        ).headers["Upload-Offset"]
        == "0"
    )
    assert (
        requests.patch(location, data=b"a,b\n1,2\n", headers=patch, timeout=30).status_code == 204
    )


def test_an_upload_never_finished_is_removed_once_it_expires(portal, token):
    created = create(portal, token, 100, name="half", filename="a.csv")
    location = portal.url + created.headers["Location"]
    requests.patch(
        location,
        data=b"x" * 50,
        timeout=30,
        headers={
            "Tus-Resumable": "1.0.0",
            "Authorization": f"Bearer {token}",
            "Upload-Offset": "0",
            "Content-Type": "application/offset+octet-stream",
        },
    )
    upload = DatasetUpload.objects.get()
    part = Path(upload.temporary_file_path)
    assert part.stat().st_size == 50
    dataset_imports_recover()
    assert part.exists()  # not expired yet
    DatasetUpload.objects.update(expires=timezone.now() - timedelta(minutes=1))
    report = dataset_imports_recover()
    assert report["uploads_removed"] == 1
    assert not part.exists() and not DatasetUpload.objects.exists()
    assert not Dataset.objects.exists()


def test_the_dataset_form_says_how_much_of_the_quota_is_used(client, student, settings):
    settings.DATASET_QUOTA_GB = 2.0
    client.force_login(student)
    page = client.get(reverse("accounts:account")).content.decode()
    assert "Dataset storage" in page and "of 2.00 GB" in page


def patch_chunk(location, token, offset, data):
    return requests.patch(
        location,
        data=data,
        timeout=60,
        headers={
            "Tus-Resumable": "1.0.0",
            "Authorization": f"Bearer {token}",
            "Upload-Offset": str(offset),
            "Content-Type": "application/offset+octet-stream",
        },
    )


def test_a_byte_past_the_declared_length_is_refused_and_none_of_its_chunk_is_kept(portal, token):
    created = create(portal, token, 1, name="one", filename="a.csv")
    location = portal.url + created.headers["Location"]
    too_long = patch_chunk(location, token, 0, b"x" * 8 * 2**20)
    assert too_long.status_code == 413
    assert "past the upload's declared length (1 bytes)" in too_long.json()["error"]["message"]
    upload = DatasetUpload.objects.get()
    assert upload.upload_offset == 0
    assert Path(upload.temporary_file_path).stat().st_size == 0
    assert patch_chunk(location, token, 0, b"x").status_code == 204
    assert patch_chunk(location, token, 1, b"y").status_code in (404, 409, 413)


def test_an_upload_must_say_its_length_when_it_is_created(portal, token):
    headers = {"Authorization": f"Bearer {token}", "Tus-Resumable": "1.0.0"}
    url = f"{portal.url}/api/v1/dataset-uploads/"
    for extra in (
        {"Upload-Defer-Length": "1"},
        {},
        {"Upload-Length": "0"},
        {"Upload-Length": "-1"},
        {"Upload-Length": "10", "Upload-Defer-Length": "1"},
    ):
        refused = requests.post(url, timeout=30, headers={**headers, **extra})
        assert refused.status_code == 400, (extra, refused.text)
    assert "Send Upload-Length" in refused.json()["error"]["message"]
    assert DatasetUpload.objects.count() == 0
    offered = requests.options(url, timeout=30, headers=headers)
    assert "creation-defer-length" not in offered.headers["Tus-Extension"]
    assert "creation" in offered.headers["Tus-Extension"].split(",")


def test_uploads_in_progress_count_against_the_quota(portal, token, settings):
    settings.DATASET_QUOTA_GB = 1.0
    first = create(portal, token, 600 * 10**6, name="first", filename="a.csv")
    assert first.status_code == 201, first.text
    second = create(portal, token, 600 * 10**6, name="second", filename="b.csv")
    assert second.status_code == 403
    assert "keep 0.60 GB; this one needs 0.60 GB more" in second.json()["error"]["message"]
    requests.delete(
        portal.url + first.headers["Location"],
        timeout=30,
        headers={"Authorization": f"Bearer {token}", "Tus-Resumable": "1.0.0"},
    )
    again = create(portal, token, 600 * 10**6, name="second", filename="b.csv")
    assert again.status_code == 201, again.text


def test_patches_of_one_upload_at_the_same_moment_are_written_one_at_a_time(portal, token):
    import threading

    size = 8 * 2**20
    created = create(portal, token, 2 * size, name="raced", filename="a.bin")
    location = portal.url + created.headers["Location"]
    start, answers = threading.Barrier(2), {}

    def send(byte):
        start.wait()
        answers[byte] = patch_chunk(location, token, 0, byte * size).status_code

    senders = [threading.Thread(target=send, args=(byte,)) for byte in (b"a", b"b")]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(60)
    assert sorted(answers.values()) == [204, 409], answers
    winner = next(byte for byte, status in answers.items() if status == 204)
    upload = DatasetUpload.objects.get()
    assert upload.upload_offset == size
    assert Path(upload.temporary_file_path).read_bytes() == winner * size
