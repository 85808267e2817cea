"""A job that keeps swapping its output file and folder for links to the portal's secrets
while its owner downloads, zips and publishes its outputs. In shared-file-system mode a
job's processes write the folder the portal reads, so whatever the timing, nothing the
portal sends may come from the far end of a link."""

import io
import os
import tarfile
import threading
import zipfile

import pytest
from django.urls import reverse

from jobs.readouts import OutputChanged
from tests.model_registry.conftest import people  # noqa: F401

SECRET = b"PORTAL-SECRET-KEY=do-not-leak"
PLAIN = b"p" * len(SECRET)  # the same size: a swap cannot show in a size check
ROUNDS = 150

pytestmark = pytest.mark.django_db(transaction=True)


def is_real_folder(path) -> bool:
    return path.is_dir() and not path.is_symlink()


def remove(path) -> None:
    if is_real_folder(path):
        (path / "a.bin").unlink(missing_ok=True)
        path.rmdir()
    elif path.is_symlink() or path.exists():
        path.unlink()


class Flipper:
    """The job's side: outputs/a.bin flips between a file and a link to the secret, and
    outputs/sub between a folder and a link to a folder of secrets, as fast as it can."""

    def __init__(self, outputs, secrets_dir):
        self.outputs, self.secrets = outputs, secrets_dir
        self.stop = threading.Event()
        self.flips = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def swap_in(self, name, make):
        target, staged = self.outputs / name, self.outputs / f".{name}.next"
        remove(staged)
        make(staged)
        if is_real_folder(target):
            # A folder cannot be replaced in one step: park it first.
            parked = self.outputs / f".{name}.old"
            os.rename(target, parked)
            os.rename(staged, target)
            remove(parked)
        elif is_real_folder(staged):
            target.unlink(missing_ok=True)
            os.rename(staged, target)
        else:
            os.replace(staged, target)

    def run(self):
        def plain_file(path):
            path.write_bytes(PLAIN)

        def plain_folder(path):
            path.mkdir()
            (path / "a.bin").write_bytes(PLAIN)

        while not self.stop.is_set():
            for name, real, fake in (
                ("a.bin", plain_file, lambda p: p.symlink_to(self.secrets / "a.bin")),
                ("sub", plain_folder, lambda p: p.symlink_to(self.secrets)),
            ):
                self.swap_in(name, fake)
                self.swap_in(name, real)
            self.flips += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)


@pytest.fixture
def racing_job(people, finished_job, tmp_path):  # noqa: F811
    secrets_dir = tmp_path / "etc-nightshift"
    secrets_dir.mkdir()
    (secrets_dir / "a.bin").write_bytes(SECRET)
    job = finished_job(
        people.student,
        lab=people.lab.name,
        files={"outputs/a.bin": PLAIN, "outputs/sub/a.bin": PLAIN},
    )
    return job, Flipper(job.directory / "outputs", secrets_dir)


def test_downloads_and_zips_never_follow_a_link_the_job_swaps_in(people, racing_job):  # noqa: F811
    job, flipper = racing_job
    api = people.api(people.student)
    outcomes = set()
    with flipper:
        for _ in range(ROUNDS):
            for path in ("outputs/a.bin", "outputs/sub/a.bin"):
                one = api.get(reverse("api:job-output", args=[job.public_id, path]))
                body = b"".join(one.streaming_content) if one.status_code == 200 else b""
                assert SECRET not in body
                outcomes.add((path, one.status_code, body == PLAIN))
            zipped = api.get(reverse("api:job-outputs-zip", args=[job.public_id]))
            try:
                data = b"".join(zipped.streaming_content)
            except OutputChanged:
                outcomes.add(("zip", "stopped"))
                continue
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for name in archive.namelist():
                    assert archive.read(name) != SECRET, name
            outcomes.add(("zip", "whole"))
    assert flipper.flips > ROUNDS  # the swaps really raced the reads
    # Both sides of the race were met: plain files read whole, and links refused.
    assert ("outputs/a.bin", 200, True) in outcomes
    assert ("outputs/sub/a.bin", 200, True) in outcomes
    assert ("outputs/sub/a.bin", 404, False) in outcomes


def test_publishing_never_packs_a_link_the_job_swaps_in(people, racing_job):  # noqa: F811
    job, flipper = racing_job
    api = people.api(people.student)
    made = refused = 0
    files = ["outputs/a.bin", "outputs/sub/a.bin"]
    with flipper:
        for round_ in range(25):
            fields = {"job": str(job.public_id), "name": f"raced-{round_}", "files": files}
            response = api.post(reverse("api:model-list"), fields, format="json")
            if response.status_code != 201:
                refused += 1
                continue
            made += 1
            archive = api.get(
                reverse("api:model-archive", args=["vision_robotics", f"raced-{round_}", 1])
            )
            body = b"".join(archive.streaming_content)
            with tarfile.open(fileobj=io.BytesIO(body)) as tar:
                for member in tar.getmembers():
                    assert tar.extractfile(member).read() == PLAIN, member.name
    assert made + refused == 25
