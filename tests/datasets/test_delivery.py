"""A job given a dataset finds it at datasets/<name>/: its launcher fetches the version's
archive from the portal (a real HTTP server) with the job's own credential, checks it, and
keeps it in the workstation's cache, where later jobs reuse it, concurrent jobs fetch it
once, and a damaged copy is fetched again. Real launcher processes, real sockets."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from django.urls import reverse

from accounts import services as account_services
from datasets import content
from datasets.models import DatasetDelivery
from jobs.inputs import CREDENTIAL_FILE, DATASETS_MANIFEST
from jobs.models import Job, JobState
from jobs.runtime import nightshift_data
from tests.conftest import script_upload
from tests.datasets.files import SAMPLE, upload, write_tree, zip_of

pytestmark = pytest.mark.django_db(transaction=True)

READER = """
import os, nightshift
folder = nightshift.dataset_path("cats")
print("rows", open(os.path.join(folder, "train.csv")).read().count("\\n"))
print("files", sorted(os.listdir(folder)))
try:
    nightshift.dataset_path("dogs")
except LookupError as exc:
    print("lookup:", exc)
"""


@pytest.fixture
def portal(live_server, settings, fake_bridge):
    settings.PORTAL_URL = live_server.url
    return live_server


def push(api, name="cats", files=None):
    response = api.post(
        reverse("api:dataset-list"),
        {"name": name, "file": upload(zip_of(files or SAMPLE))},
        format="multipart",
    )
    assert response.status_code == 202, response.json()
    return response.json()


def submit(api, *, datasets=("cats",), script=READER, **fields) -> Job:
    response = api.post(
        reverse("api:job-list"),
        {
            "name": "reader",
            "gpus": 0,
            "script": script_upload(script),
            "datasets": list(datasets),
            **fields,
        },
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    return Job.objects.get(public_id=response.json()["id"])


def launch(job: Job, cache: Path | None, **extra) -> subprocess.CompletedProcess:
    """The job's launcher, a real process, with the arguments and environment values its
    submit description gives it (the pool's tests take the same path through HTCondor)."""
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("NIGHTSHIFT_")
    }
    environment.update(
        PYTHONPATH=".nightshift",
        NIGHTSHIFT_JOB_ID=str(job.public_id),
        **dict(job.request.get("environment") or []),
        **extra,
    )
    if cache is not None:  # without, as on a workstation without the kit's cache
        environment["NIGHTSHIFT_DATA_CACHE"] = str(cache)
    command = [
        sys.executable,
        ".nightshift/launch.py",
        job.request["script_name"],
        *job.request.get("arguments", []),
    ]
    return subprocess.run(
        command, cwd=job.directory, env=environment, capture_output=True, text=True, timeout=120
    )


def delivered(job: Job) -> list[dict]:
    return json.loads((job.directory / ".nightshift" / "datasets-delivered.json").read_text())


def test_a_job_reads_its_dataset_by_name_and_a_second_job_reuses_the_workstations_copy(
    api, portal, tmp_path
):
    push(api)
    first, second = submit(api), submit(api)
    cache = tmp_path / "cache"
    ran = launch(first, cache)
    assert ran.returncode == 0, ran.stderr
    assert "rows 4" in ran.stdout and "['images', 'labels.jsonl', 'train.csv']" in ran.stdout
    assert "this job has no dataset 'dogs'; it has cats" in ran.stdout
    [record] = delivered(first)
    assert (record["how"], record["reference"]) == ("fetched", "cats@1")
    assert record["bytes_received"] == content_archive_size(first)
    files = Path(first.directory / "datasets" / "cats").resolve()
    assert files.parent.parent == cache / "objects" and files.parent.name == record["sha256"]
    assert oct((files / "train.csv").stat().st_mode & 0o777) == "0o444"
    assert oct(files.stat().st_mode & 0o777) == "0o555"
    again = launch(second, cache)
    assert again.returncode == 0, again.stderr
    assert (delivered(second)[0]["how"], delivered(second)[0]["bytes_received"]) == ("reused", 0)
    assert (
        "reusing this workstation's copy, nothing fetched"
        in (second.directory / ".nightshift" / "install.log").read_text()
    )
    # The portal sent the archive once, to the first job.
    assert list(DatasetDelivery.objects.values_list("job_id", flat=True)) == [first.pk]


def content_archive_size(job: Job) -> int:
    from datasets.storage import archive_path

    return archive_path(job.source["datasets"][0]["sha256"]).stat().st_size


def test_jobs_that_start_together_fetch_once(api, portal, tmp_path):
    push(api)
    jobs = [submit(api) for _ in range(4)]
    cache = tmp_path / "cache"
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("NIGHTSHIFT_")
    }
    running = []
    for job in jobs:
        running.append(
            subprocess.Popen(
                [sys.executable, ".nightshift/launch.py", job.request["script_name"]],
                cwd=job.directory,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={
                    **environment,
                    "PYTHONPATH": ".nightshift",
                    "NIGHTSHIFT_DATA_CACHE": str(cache),
                    "NIGHTSHIFT_JOB_ID": str(job.public_id),
                },
            )
        )
    for process in running:
        out, errors = process.communicate(timeout=120)
        assert process.returncode == 0, errors
        assert "rows 4" in out
    hows = sorted(delivered(job)[0]["how"] for job in jobs)
    assert hows == ["fetched", "reused", "reused", "reused"]
    assert DatasetDelivery.objects.count() == 1


def test_a_damaged_copy_is_found_and_fetched_again(api, portal, tmp_path):
    push(api)
    cache = tmp_path / "cache"
    first = submit(api)
    assert launch(first, cache).returncode == 0
    entry = cache / "objects" / first.source["datasets"][0]["sha256"]
    # Cut short: found by comparing the files with the entry's index.
    train = entry / "files" / "train.csv"
    os.chmod(train, 0o644)
    train.write_text("x,y\n")
    second = submit(api)
    ran = launch(second, cache)
    assert ran.returncode == 0, ran.stderr
    assert "rows 4" in ran.stdout
    log = (second.directory / ".nightshift" / "install.log").read_text()
    assert "this workstation's copy is damaged (1 of its files changed" in log
    assert delivered(second)[0]["how"] == "fetched"
    # The same size and time, other bytes: found when the entry is hashed again in full.
    os.chmod(train, 0o644)
    body = train.read_bytes()
    train.write_bytes(body.replace(b"1,2", b"9,9"))
    os.utime(train, (0, 0))
    os.chmod(train, 0o444)
    index = json.loads((entry / "index.json").read_text())
    index["verified_at"] = time.time() - 48 * 3600
    (entry / "index.json").write_text(json.dumps(index))
    third = submit(api)
    ran = launch(third, cache)
    assert ran.returncode == 0, ran.stderr
    log = (third.directory / ".nightshift" / "install.log").read_text()
    assert "its files hash to" in log and "fetching it again" in log
    assert b"1,2" in train.read_bytes()
    assert DatasetDelivery.objects.count() == 3


def test_without_a_cache_the_job_fetches_into_its_own_sandbox(api, portal):
    push(api)
    job = submit(api)
    ran = launch(job, None)
    assert ran.returncode == 0, ran.stderr
    assert "rows 4" in ran.stdout
    assert delivered(job)[0]["how"] == "fetched into the sandbox"
    log = (job.directory / ".nightshift" / "install.log").read_text()
    assert "this workstation has no dataset cache" in log and "for this job only" in log


def test_the_cache_stays_under_its_cap_by_removing_what_was_used_longest_ago(api, portal, tmp_path):
    push(api)
    push(api, name="dogs", files={"dogs.csv": "a\n" * 5000})
    cache = tmp_path / "cache"
    cats = submit(api)
    assert launch(cats, cache).returncode == 0
    dogs = submit(api, datasets=["dogs"], script="print('ok')\n")
    ran = launch(dogs, cache, NIGHTSHIFT_DATA_CACHE_GB="0.000001")
    assert ran.returncode == 0, ran.stderr
    left = sorted(p.name for p in (cache / "objects").iterdir())
    assert left == [dogs.source["datasets"][0]["sha256"]]
    assert "to stay under its size cap" in (dogs.directory / ".nightshift/install.log").read_text()


def test_a_shared_folder_dataset_is_linked_never_copied(api, portal, settings, tmp_path):
    settings.DATASET_ROOTS = [tmp_path / "shared"]
    folder = write_tree(tmp_path / "shared" / "cats", SAMPLE)
    response = api.post(
        reverse("api:dataset-list"), {"name": "cats", "path": str(folder)}, format="json"
    )
    assert response.status_code == 202
    job = submit(api)
    ran = launch(job, tmp_path / "cache")
    assert ran.returncode == 0, ran.stderr
    assert "rows 4" in ran.stdout
    assert os.readlink(job.directory / "datasets" / "cats") == str(folder)
    assert delivered(job)[0]["how"] == "linked"
    assert DatasetDelivery.objects.count() == 0


def test_only_a_running_jobs_own_credential_fetches_only_its_own_datasets(api, portal):
    push(api)
    push(api, name="dogs", files={"dogs.csv": "a\n"})
    job = submit(api)
    [cats] = job.source["datasets"]
    dogs_sha = submit(api, datasets=["dogs"]).source["datasets"][0]["sha256"]
    credential = (job.directory / ".nightshift" / CREDENTIAL_FILE).read_text()
    assert oct((job.directory / ".nightshift" / CREDENTIAL_FILE).stat().st_mode & 0o777) == "0o600"

    def fetch(sha256, token):
        return requests.get(
            f"{portal.url}/api/v1/dataset-delivery/{sha256}.tar",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )

    ok = fetch(cats["sha256"], credential)
    assert ok.status_code == 200 and ok.headers["X-Checksum-Sha256"] == cats["sha256"]
    assert fetch(dogs_sha, credential).status_code == 404
    assert fetch(cats["sha256"], credential[:-2] + "xx").status_code == 401
    assert fetch(cats["sha256"], "").status_code == 401
    assert fetch("..%2F..%2Fetc%2Fpasswd", credential).status_code == 404
    assert fetch(cats["sha256"].upper(), credential).status_code == 404
    # A user's own API token is not a job's credential.
    token = account_services.token_create(user=job.owner, name="not a job's").secret
    assert fetch(cats["sha256"], token).status_code == 401
    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED)
    refused = fetch(cats["sha256"], credential)
    assert refused.status_code == 401 and "its job has ended" in refused.json()["error"]["message"]


def test_the_workstation_hashes_a_copy_as_the_portal_packs_it(tmp_path):
    tree = write_tree(tmp_path / "tree", {**SAMPLE, "deep/a/b/long name ü.txt": "x" * 300})
    packed = content.pack(tree, content.dataset_files(tree, content.Limits(100, 10**9)), None)
    assert nightshift_data.canonical_digest(str(tree)) == packed.sha256


def test_the_manifest_names_each_dataset_for_the_launcher(api, portal):
    push(api)
    job = submit(api)
    [record] = json.loads((job.directory / ".nightshift" / DATASETS_MANIFEST).read_text())[
        "datasets"
    ]
    assert record["url"].startswith(portal.url + "/api/v1/dataset-delivery/")
    assert (record["name"], record["kind"], record["file_count"]) == ("cats", "archive", 4)
    assert job.request["install_requirements"] is True


@pytest.mark.parametrize("member", ["../outside.txt", "/etc/passwd", "a/../../b", "link"])
def test_a_hostile_archive_member_is_refused_by_the_launcher_and_nothing_is_left(tmp_path, member):
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        info = tarfile.TarInfo(member)
        if member == "link":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            archive.addfile(info)
        else:
            info.size = 1
            archive.addfile(info, io.BytesIO(b"x"))
    expected = {"reference": "evil@1", "sha256": "0" * 64, "file_count": 1, "size_bytes": 1}
    target = tmp_path / "entry" / "files"
    with pytest.raises(nightshift_data.DeliveryError, match="not a plain file inside it"):
        nightshift_data.unpack(io.BytesIO(out.getvalue()), str(target), expected)
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "b").exists()


def test_the_launcher_puts_a_record_only_in_a_folder_it_knows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    nightshift_data.link("m", str(tmp_path), "models")
    assert os.readlink("models/m") == str(tmp_path)
    for folder in ("..", "/etc", ".nightshift", "outputs"):
        with pytest.raises(nightshift_data.DeliveryError, match="which is not one of"):
            nightshift_data.link("m", str(tmp_path), folder)
