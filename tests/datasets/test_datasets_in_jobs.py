"""Attaching datasets to jobs, sweeps and studies through the API and the form: what is
refused and why, what the reproducibility record keeps, what a clone keeps, and that a
dataset in use by a job that has not ended cannot be deleted."""

import json

import pytest
from django.urls import reverse

from condor_bridge.submit import DATA_PLUGIN
from datasets.models import Dataset
from experiments.models import Sweep
from jobs.inputs import DATASETS_MANIFEST
from jobs.models import Job, JobState
from tests.conftest import client_with_token, script_upload
from tests.datasets.files import SAMPLE, upload, zip_of
from tests.factories import LabFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)
JOBS = reverse("api:job-list")


@pytest.fixture(autouse=True)
def eager(fake_bridge):
    """Imports and submissions run in place, on the fake bridge."""


def push(api, name="cats", files=None, **fields):
    response = api.post(
        reverse("api:dataset-list"),
        {"name": name, "file": upload(zip_of(files or SAMPLE)), **fields},
        format="multipart",
    )
    assert response.status_code == 202, response.json()


def submit(api, datasets, **fields):
    return api.post(
        JOBS,
        {"name": "reader", "gpus": 0, "script": script_upload(), "datasets": datasets, **fields},
        format="multipart",
    )


def refusal(response) -> str:
    assert response.status_code == 400, response.json()
    [message] = response.json()["error"]["fields"]["datasets"]
    return message


@pytest.mark.parametrize(
    "hostile",
    [
        "../../etc",
        "cats/../dogs",
        "$(touch /tmp/x)",
        "cats@1;rm -rf /",
        "cats\nqueue 5",
        "cats@-1",
        "cats@",
        "@1",
        "cats@1@2",
        "ca ts",
    ],
)
def test_a_hostile_reference_is_refused_and_no_job_is_made(api, hostile):
    push(api)
    message = refusal(submit(api, [hostile]))
    assert "is not a dataset: give NAME or NAME@VERSION" in message
    assert Job.objects.count() == 0


def test_a_dataset_one_may_not_use_is_refused_as_if_it_did_not_exist(api, other_student):
    push(client_with_token(other_student), name="secret")
    assert "There is no dataset secret that you may use" in refusal(submit(api, ["secret"]))
    assert "There is no dataset nothing" in refusal(submit(api, ["nothing"]))


def test_a_missing_version_names_the_versions_there_are(api):
    push(api)
    assert refusal(submit(api, ["cats@7"])) == "cats has no version 7; its versions: 1."


def test_the_same_dataset_twice_and_too_many_datasets_are_refused(api):
    push(api)
    assert "cats is named twice" in refusal(submit(api, ["cats", "cats@1"]))
    assert refusal(submit(api, [f"d{n}" for n in range(9)])).startswith(
        "Ensure this field has no more than 8 elements"
    )


def test_a_project_with_its_own_datasets_folder_of_that_name_is_refused(api):
    import io
    import tarfile

    push(api)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, body in (("train.py", b"print(1)\n"), ("datasets/cats/x.csv", b"a\n")):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
    project = upload(out.getvalue(), "project.tar.gz")
    response = api.post(
        JOBS,
        {
            "name": "p",
            "gpus": 0,
            "script": project,
            "datasets": ["cats"],
            "entry_command": "python train.py",
        },
        format="multipart",
    )
    assert "The project has its own datasets/cats" in refusal(response)


def test_a_lab_members_dataset_is_used_and_the_record_keeps_its_version_and_hash(api, student):
    lab = LabFactory(name="vision")
    MembershipFactory(lab=lab, user=student)
    colleague = UserFactory(username="colleague")
    MembershipFactory(lab=lab, user=colleague)
    push(client_with_token(colleague), name="shared-cats", visibility="lab", lab=lab.name)
    response = submit(api, ["shared-cats"])
    assert response.status_code == 201, response.json()
    [record] = response.json()["reproducibility"]["datasets"]
    version = Dataset.objects.get(name="shared-cats").versions.get()
    assert record == {
        "reference": "shared-cats@1",
        "sha256": version.sha256,
        "kind": "archive",
        "size_bytes": version.size_bytes,
        "file_count": 4,
    }


def test_a_clone_and_a_rerun_keep_the_version_the_job_read(api):
    push(api)
    job = Job.objects.get(public_id=submit(api, ["cats"]).json()["id"])
    push(api, files={"train.csv": "new\n"})  # cats@2
    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED)
    rerun = api.post(reverse("api:job-rerun", args=[job.public_id]), format="json")
    assert rerun.status_code == 201, rerun.json()
    assert [d["reference"] for d in rerun.json()["reproducibility"]["datasets"]] == ["cats@1"]
    latest = api.post(
        reverse("api:job-clone", args=[job.public_id]), {"datasets": ["cats"]}, format="json"
    )
    assert [d["reference"] for d in latest.json()["reproducibility"]["datasets"]] == ["cats@2"]


def test_a_dataset_in_use_by_a_job_that_has_not_ended_cannot_be_deleted(api):
    push(api)
    job = Job.objects.get(public_id=submit(api, ["cats"]).json()["id"])
    refused = api.delete(reverse("api:dataset-detail", args=["cats"]))
    assert refused.status_code == 409
    assert refused.json()["error"]["message"] == (
        "cats is used by 1 job that has not ended (“reader”); delete it once it has ended, "
        "or cancel it."
    )
    assert Dataset.objects.filter(name="cats").exists()
    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED)
    assert api.delete(reverse("api:dataset-detail", args=["cats"])).status_code == 204


def test_a_sweeps_runs_share_the_list_and_each_has_its_own_credential(api):
    push(api)
    response = api.post(
        reverse("api:sweep-list"),
        {
            "name": "grid",
            "gpus": 0,
            "script": script_upload(),
            "datasets": ["cats"],
            "parameters": json.dumps({"grid": {"lr": [0.1, 0.2]}}),
            "arguments": ["--lr={lr}"],
        },
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    runs = list(Sweep.objects.get().runs.order_by("sweep_index"))
    manifests = [(run.directory / ".nightshift" / DATASETS_MANIFEST) for run in runs]
    assert manifests[0].stat().st_ino == manifests[1].stat().st_ino
    # And the transfer plugin each brings, with the same nightshift:// URL for HTCondor.
    plugins = [(run.directory / DATA_PLUGIN).stat() for run in runs]
    assert plugins[0].st_ino == plugins[1].st_ino and plugins[0].st_mode & 0o777 == 0o755
    assert runs[0].request["dataset_urls"] == runs[1].request["dataset_urls"] != []
    credentials = {(run.directory / ".nightshift/credential").read_text() for run in runs}
    assert len(credentials) == 2
    assert all(run.source["datasets"][0]["reference"] == "cats@1" for run in runs)


def test_the_form_offers_the_datasets_one_may_use_and_submits_with_them(client, student):
    push(client_with_token(student))
    client.force_login(student)
    page = client.get(reverse("jobs:new")).content.decode()
    assert 'name="datasets" value="cats"' in page and "cats (version 1," in page
    form = {
        "name": "reader",
        "gpus": 0,
        "cpus": 1,
        "memory_gb": 1,
        "script": script_upload(),
        "datasets": ["cats"],
    }
    response = client.post(reverse("jobs:new"), form)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Job.objects.get().source["datasets"][0]["reference"] == "cats@1"


def test_the_datasets_page_lists_the_jobs_and_sweeps_that_used_it_and_the_job_page_the_version(
    client, student, other_student
):
    push(client_with_token(student), visibility="private")
    api = client_with_token(student)
    job = Job.objects.get(public_id=submit(api, ["cats"]).json()["id"])
    client.force_login(student)
    dataset = Dataset.objects.get(name="cats")
    page = client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert 'data-role="use"' in page and "reader" in page and "cats@1" in page
    job_page = client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert "datasets/cats/" in job_page and dataset.versions.get().sha256 in job_page
