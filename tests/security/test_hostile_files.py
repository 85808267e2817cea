"""Hostile uploads through the API and the web form: every one is refused with a reason
that names the upload, no job is created, and nothing is written outside the job folders."""

import io
import os
import tarfile
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from jobs.models import Job
from tests.conftest import client_with_token

pytestmark = pytest.mark.django_db


def zip_of(members: dict[str, bytes], *, symlink: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo("link")
            info.external_attr = 0o120777 << 16  # a symbolic link, as zip stores one
            archive.writestr(info, symlink)
    return buffer.getvalue()


def tar_of(members: dict[str, bytes], *, link: tuple[str, str, bytes] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link[0])
            info.type, info.linkname = link[2], link[1]
            archive.addfile(info)
    return buffer.getvalue()


TRAIN = {"train.py": b"print('hi')\n"}
HOSTILE_ARCHIVES = {
    "zip slip": ("p.zip", zip_of({**TRAIN, "../../x.py": b"evil"})),
    "absolute path": ("p.zip", zip_of({**TRAIN, "/etc/cron.d/x": b"evil"})),
    "control characters in a name": ("p.zip", zip_of({**TRAIN, "a\x1b[31mred.py": b""})),
    "zip symlink out": ("p.zip", zip_of(TRAIN, symlink="/etc/passwd")),
    "tar symlink out": ("p.tar.gz", tar_of(TRAIN, link=("l", "/etc/passwd", tarfile.SYMTYPE))),
    "tar hard link out": ("p.tar.gz", tar_of(TRAIN, link=("h", "/etc/passwd", tarfile.LNKTYPE))),
    "zip bomb": ("p.zip", zip_of({**TRAIN, "zeros.bin": b"\0" * (40 * 2**20)})),
    "too many files": ("p.zip", zip_of({**TRAIN, **{f"f{i}.txt": b"" for i in range(60)}})),
    "not an archive at all": ("p.zip", b"PK\x03\x04 this is not really a zip"),
}


@pytest.fixture
def small_limits(settings):
    settings.ARCHIVE_MAX_FILES = 50
    settings.ARCHIVE_MAX_EXPANDED_MB = 20
    return settings


@pytest.mark.parametrize("attack", HOSTILE_ARCHIVES)
def test_a_hostile_archive_is_refused_through_the_api(
    fake_bridge, student, small_limits, tmp_path, attack
):
    name, data = HOSTILE_ARCHIVES[attack]
    response = client_with_token(student).post(
        reverse("api:job-list"),
        {
            "name": attack,
            "script": SimpleUploadedFile(name, data),
            "entry_command": "python train.py",
        },
        format="multipart",
    )
    assert response.status_code == 400, response.content
    assert "script" in response.json()["error"]["fields"]
    assert Job.objects.count() == 0
    jobs_dir = small_limits.JOBS_DIR
    left = [p for p in jobs_dir.rglob("*") if p.is_file()] if jobs_dir.exists() else []
    assert left == []  # nothing unpacked, not even inside the jobs folder
    assert not (tmp_path / "x.py").exists() and not (jobs_dir.parent / "x.py").exists()


@pytest.mark.parametrize("attack", ["zip slip", "tar symlink out", "zip bomb"])
def test_a_hostile_archive_is_refused_on_the_web_form(
    fake_bridge, student_client, small_limits, attack
):
    name, data = HOSTILE_ARCHIVES[attack]
    response = student_client.post(
        reverse("jobs:new"),
        {
            "name": attack,
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 0.25,
            "arguments": "",
            "script": SimpleUploadedFile(name, data),
            "entry_command": "python train.py",
        },
    )
    assert response.status_code == 400
    assert b'role="alert"' in response.content
    assert Job.objects.count() == 0


def test_an_oversize_upload_is_refused_with_the_limit_named(fake_bridge, student, settings):
    settings.MAX_UPLOAD_MB = 1
    data = zip_of({**TRAIN, "big.bin": os.urandom(2 * 2**20)})  # 2 MB that no zip can shrink
    response = client_with_token(student).post(
        reverse("api:job-list"),
        {
            "name": "big",
            "script": SimpleUploadedFile("p.zip", data),
            "entry_command": "python train.py",
        },
        format="multipart",
    )
    assert response.status_code == 400
    assert "larger than 1 MB" in response.json()["error"]["message"]
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    ("uploaded", "kept_as"),
    [
        ("../../etc/x.py", "x.py"),
        ("a\x1b]0;pwned\x07b.py", "a_0_pwnedb.py"),
        ("$(HOME).py", "HOME.py"),
        ("-rf .py", "rf.py"),
        ("..py", "train.py"),
    ],
)
def test_an_uploaded_script_name_cannot_name_a_path_or_carry_syntax(
    fake_bridge, student, uploaded, kept_as
):
    response = client_with_token(student).post(
        reverse("api:job-list"),
        {
            "name": "n",
            "script": SimpleUploadedFile(uploaded, b"print(1)\n"),
        },
        format="multipart",
    )
    assert response.status_code == 201, response.content
    job = Job.objects.get()
    assert job.request["script_name"] == kept_as
    assert sorted(p.name for p in job.directory.iterdir() if p.suffix == ".py") == [kept_as]
