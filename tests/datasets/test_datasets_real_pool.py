"""On the personal pool: a 1 GiB dataset used by 8 jobs spread over the workstations moves
at most once to each workstation (the portal's delivery records and the launchers' own);
later jobs on a workstation start without a transfer; the job reads it read-only at
datasets/<name>/; a damaged copy in a workstation's cache is found and fetched again. Jobs
fetch from the portal (a real HTTP server) with their own credentials. In spool mode
HTCondor's own file transfer brings the dataset, through the execute-node kit's plugin or,
on a workstation without it, through the copy the job brings."""

import hashlib
import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from datasets import content, storage
from datasets.models import Dataset, DatasetDelivery, DatasetVersion
from jobs.bridge import get_bridge
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.helpers import POOL_ROOT, owners_present, wait_for
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(900)]

WORKSTATIONS = ("ws-ampere", "ws-volta", "ws-fermi", "ws-office")
GIB = 1024**3
READER = """
import hashlib, os, time, nightshift
folder = nightshift.dataset_path("big")
path = os.path.join(folder, "blob.bin")
with open(path, "rb") as blob:
    head = hashlib.sha256(blob.read(1 << 20)).hexdigest()
print("size", os.path.getsize(path), "head", head)
try:
    open(path, "ab")
except PermissionError:
    print("write refused")
time.sleep(3)
"""


@pytest.fixture
def web(client, live_pipeline, live_server, settings):
    settings.PORTAL_URL = live_server.url
    user = get_user_model().objects.create_user("ada", password="a-long-test-password")
    client.force_login(user)
    return client


def stored_version(folder: Path, name: str, mebibytes: int) -> DatasetVersion:
    """A version of `mebibytes` of incompressible data, packed and stored as an import would
    leave it, owned by ada."""
    folder.mkdir()
    block = os.urandom(1 << 20)
    with open(folder / "blob.bin", "wb") as out:
        for index in range(mebibytes):
            out.write(hashlib.sha256(block + index.to_bytes(4)).digest() * (1 << 15))
    (folder / "README").write_text(f"a dataset of {mebibytes} MiB\n")
    files = content.dataset_files(folder, content.Limits(10, 2 * GIB))
    archive = storage.archive_path("0" * 64).parent
    archive.mkdir(parents=True, exist_ok=True)
    partial = archive / "partial.tar"
    with open(partial, "wb") as out:
        digest = content.pack(folder, files, out)
    partial.rename(storage.archive_path(digest.sha256))
    shutil.rmtree(folder)
    owner = get_user_model().objects.get(username="ada")
    dataset = Dataset.objects.create(name=name, owner=owner)
    return DatasetVersion.objects.create(
        dataset=dataset,
        number=1,
        sha256=digest.sha256,
        size_bytes=digest.size_bytes,
        file_count=digest.file_count,
        source=DatasetVersion.Source.UPLOAD,
        origin=f"{name}.tar",
    )


def forget(version: DatasetVersion) -> None:
    for workstation in WORKSTATIONS:
        shutil.rmtree(cache(workstation) / "objects" / version.sha256, ignore_errors=True)
    storage.archive_path(version.sha256).unlink(missing_ok=True)


@pytest.fixture
def big(web, tmp_path):
    """A 1 GiB version."""
    version = stored_version(tmp_path / "big", "big", 1024)
    yield version
    forget(version)


def cache(workstation: str) -> Path:
    return POOL_ROOT / "var/lib/condor" / f"data-cache-{workstation}"


def submit(web, script=READER, dataset="big") -> Job:
    response = web.post(
        reverse("jobs:new"),
        {
            "name": f"reads {dataset}",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 0.25,
            "arguments": "",
            "script": script_upload(script),
            "datasets": [dataset],
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    return Job.objects.latest("created_at")


def finished(job: Job) -> dict:
    wait_for_state(job, {JobState.COMPLETED, JobState.FAILED, JobState.HELD}, timeout=600)
    stdout = (job.directory / "stdout.txt").read_text()
    log = (job.directory / ".nightshift" / "install.log").read_text()
    assert job.state == JobState.COMPLETED, (job.status_detail, stdout, log)
    assert f"size {GIB}" in stdout and "write refused" in stdout, stdout
    [record] = json.loads((job.directory / ".nightshift/datasets-delivered.json").read_text())
    return {**record, "log": log}


def test_eight_jobs_move_a_gigabyte_once_per_workstation_and_a_damaged_copy_is_fetched_again(
    web, big, desks
):
    for workstation in WORKSTATIONS:
        assert not (cache(workstation) / "objects" / big.sha256).exists()
    jobs = [submit(web) for _ in range(8)]
    records = [finished(job) for job in jobs]
    used = Counter(record["workstation"].split("@")[1] for record in records)
    fetched = Counter(r["workstation"].split("@")[1] for r in records if r["how"] == "fetched")
    # Each workstation that ran a job fetched the version once; every other job reused it.
    assert fetched == Counter(set(used.elements())), (used, fetched)
    assert sum(r["how"] == "reused" and r["bytes_received"] == 0 for r in records) == 8 - len(used)
    archive_size = storage.archive_path(big.sha256).stat().st_size
    served = DatasetDelivery.objects.filter(sha256=big.sha256)
    assert served.count() == len(used)
    assert sum(served.values_list("size_bytes", flat=True)) == len(used) * archive_size
    assert {d.workstation.split("@")[1] for d in served} == set(used)
    reused = next(r for r in records if r["how"] == "reused")
    assert "reusing this workstation's copy, nothing fetched" in reused["log"]

    # A damaged copy: the next job there finds it, fetches it again, and reads it whole.
    workstation = next(iter(used))
    blob = cache(workstation) / "objects" / big.sha256 / "files" / "blob.bin"
    os.chmod(blob, 0o644)
    os.truncate(blob, GIB // 2)
    desks.leaves(workstation)
    for other in set(WORKSTATIONS) - {workstation}:
        desks.returns_to(other)
    wait_for(
        lambda: owners_present() == set(WORKSTATIONS) - {workstation},
        timeout=60,
        what=f"only {workstation} free",
    )
    record = finished(submit(web))
    assert record["workstation"].split("@")[1] == workstation
    assert record["how"] == "fetched"
    assert "this workstation's copy is damaged (1 of its files changed" in record["log"]
    assert DatasetDelivery.objects.filter(sha256=big.sha256).count() == len(used) + 1
    assert blob.stat().st_size == GIB


SMALL_READER = """
import os, nightshift
path = os.path.join(nightshift.dataset_path("small"), "blob.bin")
print("size", os.path.getsize(path), "files", sorted(os.listdir(".")))
"""


def only_free(desks, workstation: str) -> None:
    desks.leaves(workstation)
    for other in set(WORKSTATIONS) - {workstation}:
        desks.returns_to(other)
    wait_for(
        lambda: owners_present() == set(WORKSTATIONS) - {workstation},
        timeout=60,
        what=f"only {workstation} free",
    )


def test_in_spool_mode_htcondor_brings_the_dataset_through_the_kits_plugin_or_the_jobs_own(
    web, live_pipeline, settings, tmp_path, desks
):
    # No shared folder: the job's files are spooled, and the dataset comes by URL transfer.
    jobs_dir = tmp_path / "spooled-jobs"
    settings.JOBS_DIR, settings.JOB_DIR_UID = jobs_dir, None
    version = stored_version(tmp_path / "small", "small", 16)
    live_pipeline.kill_worker()
    live_pipeline.start_worker(
        CONDOR_FILE_MODE="spool", NIGHTSHIFT_JOBS_DIR=str(jobs_dir), NIGHTSHIFT_JOB_DIR_UID=""
    )
    archive_size = storage.archive_path(version.sha256).stat().st_size
    try:
        runs = {}
        # ws-office has the cache but not the kit's plugin (the personal pool leaves it out).
        for workstation in ("ws-office", "ws-ampere"):
            only_free(desks, workstation)
            job = submit(web, SMALL_READER, "small")
            wait_for_state(job, {JobState.COMPLETED, JobState.FAILED, JobState.HELD}, timeout=300)
            assert job.state == JobState.COMPLETED, job.status_detail
            wait_for(
                lambda job=job: Job.objects.get(pk=job.pk).outputs_ready,
                timeout=60,
                what="the outputs retrieved",
            )
            runs[workstation] = job
        for workstation, by in (
            ("ws-office", "the job's own plugin"),
            ("ws-ampere", "the workstation's plugin"),
        ):
            job = runs[workstation]
            stdout = (job.directory / "stdout.txt").read_text()
            assert f"size {16 << 20}" in stdout, stdout
            # Neither the plugin's receipt nor its copy is among the job's files.
            assert f"'{version.sha256}'" not in stdout, stdout
            assert "'nightshift_dataset_plugin.py'" not in stdout, stdout
            [record] = json.loads(
                (job.directory / ".nightshift/datasets-delivered.json").read_text()
            )
            assert record["workstation"].split("@")[1] == workstation
            assert (record["how"], record["by"]) == ("fetched", f"HTCondor's file transfer ({by})")
            assert record["bytes_received"] == archive_size
            # HTCondor's own transfer record counts the bytes the plugin fetched.
            stats = str(get_bridge().job_ad(str(job.public_id))["TransferInputStats"])
            assert f"NIGHTSHIFTSizeBytesLastRun = {archive_size}" in stats, stats
        served = DatasetDelivery.objects.filter(sha256=version.sha256)
        assert sorted(d.workstation.split("@")[1] for d in served) == ["ws-ampere", "ws-office"]
    finally:
        live_pipeline.kill_worker()
        live_pipeline.start_worker()
        forget(version)
