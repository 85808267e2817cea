"""HTCondor's file-transfer plugin for datasets (spool mode): run as the starter runs it, from
the top of the job's sandbox after the job's other inputs arrived, with -infile and -outfile.
It fetches from a real portal with the job's own credential, reports to HTCondor, and leaves
the launcher only a link to make."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from condor_bridge.explain import DATASET_TRANSFER_FAILED
from condor_bridge.submit import DATA_PLUGIN, DATA_TRANSFER_SCHEME
from datasets.models import DatasetDelivery
from jobs.models import Job, JobState
from jobs.runtime import nightshift_data
from tests.datasets.test_delivery import (
    content_archive_size,
    delivered,
    launch,
    portal,
    push,
    submit,
)

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["portal"]  # the fixture, shared with the launcher's own delivery tests

JOBS_OWN = "HTCondor's file transfer (the job's own plugin)"
WORKSTATIONS = "HTCondor's file transfer (the workstation's plugin)"


def machine_ad(folder: Path, **attributes) -> Path:
    ad = folder / "machine.ad"
    lines = {"Name": "slot1@ws-test", **attributes}
    ad.write_text("".join(f'{key} = "{value}"\n' for key, value in lines.items()))
    return ad


def transfer(job: Job, ad: Path, urls: list[str] | None = None):
    """What the starter does: the job's plugin copy at the top of the sandbox, one ad per URL
    in its -infile; returns the run and the result ads it wrote to -outfile, as dicts."""
    sandbox = job.directory
    shutil.copy(sandbox / DATA_PLUGIN, sandbox / nightshift_data.PLUGIN_NAME)
    urls = job.request["dataset_urls"] if urls is None else urls
    infile, outfile = sandbox / ".plugin.in", sandbox / ".plugin.out"
    infile.write_text(
        "".join(
            f'[ Url = "{url}"; LocalFileName = "{sandbox / url.rsplit("/", 1)[1]}" ]\n'
            for url in urls
        )
    )
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("NIGHTSHIFT_", "_CONDOR_"))
    }
    environment["_CONDOR_MACHINE_AD"] = str(ad)
    ran = subprocess.run(
        [f"./{nightshift_data.PLUGIN_NAME}", "-infile", str(infile), "-outfile", str(outfile)],
        cwd=sandbox,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    results = [
        dict(re.findall(r'(\w+) = ("(?:[^"\\]|\\.)*"|[^;]+);', line))
        for line in outfile.read_text().splitlines()
        if line.strip()
    ]
    return ran, results


def test_a_job_carries_its_plugin_and_names_each_dataset_by_portal_and_sha256(api, portal):
    push(api)
    job = submit(api)
    [dataset] = job.source["datasets"]
    assert job.request["dataset_urls"] == [
        f"nightshift://{urlsplit(portal.url).netloc}/{dataset['sha256']}"
    ]
    plugin = job.directory / DATA_PLUGIN
    assert plugin.read_bytes() == Path("jobs/runtime/dataset_plugin.py").read_bytes()
    assert plugin.stat().st_mode & 0o777 == 0o755
    # A job with no dataset brings no plugin and names no URL.
    plain = submit(api, datasets=[], script="print('ok')\n")
    assert "dataset_urls" not in plain.request
    assert not (plain.directory / DATA_PLUGIN).exists()


def test_the_plugin_fetches_once_per_workstation_and_tells_htcondor_what_it_moved(
    api, portal, tmp_path
):
    push(api)
    first, second = submit(api), submit(api)
    cache = tmp_path / "cache"
    ad = machine_ad(tmp_path, NightshiftDataCache=cache)
    ran, [result] = transfer(first, ad)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    size = content_archive_size(first)
    assert (result["TransferSuccess"], result["TransferTotalBytes"]) == ("true", str(size))
    assert result["TransferProtocol"] == '"nightshift"'
    assert result["TransferUrl"] == f'"{first.request["dataset_urls"][0]}"'
    log = (first.directory / ".nightshift" / "install.log").read_text()
    assert f"{JOBS_OWN}: cats@1: fetching" in log
    # The job starts: the launcher finds the dataset in place and only links it.
    started = launch(first, cache)
    assert started.returncode == 0, started.stderr
    assert "rows 4" in started.stdout
    [record] = delivered(first)
    assert (record["how"], record["by"], record["bytes_received"]) == ("fetched", JOBS_OWN, size)
    # Neither the receipt nor HTCondor's copy of the plugin is left among the job's files.
    assert not (first.directory / record["sha256"]).exists()
    assert not (first.directory / nightshift_data.PLUGIN_NAME).exists()
    # A second job on the same workstation moves nothing, and HTCondor records 0 bytes.
    ran, [result] = transfer(second, ad)
    assert (result["TransferSuccess"], result["TransferTotalBytes"]) == ("true", "0")
    assert launch(second, cache).returncode == 0
    assert (delivered(second)[0]["how"], delivered(second)[0]["bytes_received"]) == ("reused", 0)
    assert DatasetDelivery.objects.count() == 1


def test_a_workstation_without_a_cache_still_gets_the_dataset_into_the_jobs_sandbox(
    api, portal, tmp_path
):
    push(api)
    job = submit(api)
    ran, [result] = transfer(job, machine_ad(tmp_path))
    assert result["TransferSuccess"] == "true", result
    started = launch(job, None)
    assert started.returncode == 0, started.stderr
    assert "rows 4" in started.stdout
    [record] = delivered(job)
    assert (record["how"], record["by"]) == ("fetched into the sandbox", JOBS_OWN)
    assert DatasetDelivery.objects.count() == 1


def test_the_jobs_copy_hands_over_to_the_plugin_the_execute_node_kit_installed(
    api, portal, tmp_path
):
    push(api)
    job = submit(api)
    # As join-pool.sh installs them: the plugin and the delivery modules beside it.
    installed = tmp_path / "libexec" / "nightshift_data_plugin.py"
    installed.parent.mkdir()
    shutil.copy(Path("deploy/execute-node/nightshift_data_plugin.py"), installed)
    shutil.copy(Path("deploy/execute-node/nightshift_data.py"), installed.parent)
    shutil.copy(Path("deploy/execute-node/cache_keeper.py"), installed.parent)
    installed.chmod(0o755)
    cache = tmp_path / "cache"
    ad = machine_ad(tmp_path, NightshiftDataCache=cache, NightshiftDataPlugin=installed)
    ran, [result] = transfer(job, ad)
    assert result["TransferSuccess"] == "true", ran.stdout + ran.stderr
    assert (
        f"{WORKSTATIONS}: cats@1: fetching"
        in (job.directory / ".nightshift" / "install.log").read_text()
    )
    assert launch(job, cache).returncode == 0
    assert delivered(job)[0]["by"] == WORKSTATIONS


def test_a_refused_fetch_goes_back_to_htcondor_with_the_portals_reason(api, portal, tmp_path):
    push(api)
    job = submit(api)
    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED)
    ran, [result] = transfer(job, machine_ad(tmp_path, NightshiftDataCache=tmp_path / "cache"))
    assert ran.returncode == 1
    assert result["TransferSuccess"] == "false"
    # The words the portal's hold explanation looks for.
    assert f"{DATASET_TRANSFER_FAILED}: the portal refused cats@1" in result["TransferError"]
    assert "its job has ended" in result["TransferError"]
    assert not (job.directory / "datasets").exists()
    assert not list((tmp_path / "cache" / "objects").iterdir())


def test_the_plugin_brings_only_the_versions_the_job_was_given(api, portal, tmp_path):
    push(api)
    push(api, name="dogs", files={"dogs.csv": "a\n"})
    job = submit(api)
    other = submit(api, datasets=["dogs"]).request["dataset_urls"][0]
    ran, [result] = transfer(job, machine_ad(tmp_path), urls=[other])
    assert result["TransferSuccess"] == "false"
    assert "the job was not given the dataset version" in result["TransferError"]
    ran, [result] = transfer(job, machine_ad(tmp_path), urls=["nightshift://x/../../etc"])
    assert "is not a nightshift://PORTAL/SHA256 dataset URL" in result["TransferError"]
    assert DatasetDelivery.objects.count() == 0


def test_htcondor_learns_what_the_plugin_handles_from_its_classad():
    ran = subprocess.run(
        [sys.executable, "deploy/execute-node/nightshift_data_plugin.py", "-classad"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert f'SupportedMethods = "{DATA_TRANSFER_SCHEME}"' in ran.stdout
    assert "MultipleFileSupport = true" in ran.stdout
    assert 'PluginType = "FileTransfer"' in ran.stdout


def test_two_datasets_with_the_same_content_travel_once_and_appear_under_both_names(
    api, portal, tmp_path
):
    push(api)
    push(api, name="kittens")
    job = submit(api, datasets=["cats", "kittens"])
    assert len(job.request["dataset_urls"]) == 1
    cache = tmp_path / "cache"
    ran, [result] = transfer(job, machine_ad(tmp_path, NightshiftDataCache=cache))
    assert result["TransferSuccess"] == "true", ran.stdout + ran.stderr
    assert result["TransferTotalBytes"] == str(content_archive_size(job))
    assert launch(job, cache).returncode == 0
    assert [record["name"] for record in delivered(job)] == ["cats", "kittens"]
    for name in ("cats", "kittens"):
        assert (job.directory / "datasets" / name / "train.csv").is_file()
    assert DatasetDelivery.objects.count() == 1
