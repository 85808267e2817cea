"""Publishing a finished job's outputs as a model version, through the API: what the version
keeps (files, metrics, lineage), that it never changes, and what is refused and why."""

import io
import os
import tarfile

import pytest
from django.urls import reverse

from audit.models import AuditEntry
from model_registry.models import ModelVersion
from tests.conftest import WEIGHTS, client_with_token
from tests.model_registry.conftest import MODELS, publish, published

pytestmark = pytest.mark.django_db(transaction=True)


def archive_files(response) -> dict[str, bytes]:
    body = b"".join(response.streaming_content)
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_a_version_keeps_the_chosen_files_the_metrics_and_the_lineage(people, finished_job):
    job = finished_job(people.student, lab=people.lab.name)
    version = published(
        people.student,
        job,
        files=["outputs/model.pt", "outputs/tokenizer/vocab.txt"],
        card="# BERT small\n\nFine-tuned on reviews.",
    )
    assert version["reference"] == "vision_robotics/bert-small@1"
    assert [f["path"] for f in version["files"]] == ["model.pt", "tokenizer/vocab.txt"]
    assert version["metrics"]["final"] == {"loss": 0.7, "accuracy": 0.8}
    assert version["metrics"]["best"]["loss"] == {"value": 0.5, "step": 1, "goal": "min"}
    assert version["metrics"]["best"]["accuracy"] == {"value": 0.9, "step": 1, "goal": "max"}
    lineage = version["lineage"]
    assert lineage["job"]["id"] == str(job.public_id) and lineage["job"]["owner"] == "sam"
    assert lineage["reproducibility"]["seed"] == job.seed
    assert lineage["reproducibility"]["sha256"] == job.source["sha256"]
    assert version["visibility"] == "lab" and version["job"] == str(job.public_id)
    download = people.api(people.labmate).get(
        reverse("api:model-archive", args=["vision_robotics", "bert-small", 1])
    )
    assert download.status_code == 200 and download["X-Checksum-Sha256"] == version["sha256"]
    assert archive_files(download) == {"model.pt": WEIGHTS, "tokenizer/vocab.txt": b"a\nb\nc\n"}
    audit = AuditEntry.objects.filter(action="model.publish")
    assert audit.filter(detail__startswith="vision_robotics/bert-small@1").exists()


def test_a_second_publication_is_a_new_version_and_the_first_never_changes(people, finished_job):
    first_job = finished_job(people.student, lab=people.lab.name)
    first = published(people.student, first_job)
    second_job = finished_job(
        people.student,
        lab=people.lab.name,
        files={"outputs/model.pt": b"better weights"},
        metrics=[{"step": 0, "loss": 0.1}],
    )
    second = published(people.student, second_job)
    assert (first["number"], second["number"]) == (1, 2)
    again = (
        people.api(people.student)
        .get(reverse("api:model-version", args=["vision_robotics", "bert-small", 1]))
        .json()
    )
    assert again == {**first, "lineage": again["lineage"]} and again["sha256"] == first["sha256"]
    assert again["lineage"] == first["lineage"]
    latest = (
        people.api(people.student)
        .get(reverse("api:model-latest", args=["vision_robotics", "bert-small"]))
        .json()
    )
    assert latest["number"] == 2 and latest["metrics"]["final"] == {"loss": 0.1}
    # Deleting the job that made a version leaves the version and its lineage whole.
    first_job.delete()
    kept = ModelVersion.objects.get(model__name="bert-small", number=1)
    assert kept.job is None and kept.lineage["job"]["id"] == str(first_job.public_id)


def test_a_version_survives_its_jobs_outputs_being_purged(people, finished_job):
    job = finished_job(people.student, lab=people.lab.name)
    version = published(people.student, job)
    for path in (job.directory / "outputs").rglob("*"):
        if path.is_file():
            path.unlink()
    download = people.api(people.student).get(
        reverse("api:model-archive", args=["vision_robotics", "bert-small", 1])
    )
    assert archive_files(download) == {"model.pt": WEIGHTS}
    assert download["X-Checksum-Sha256"] == version["sha256"]


@pytest.mark.parametrize(
    "hostile",
    [
        "../secret.txt",
        "/etc/passwd",
        "outputs/../train.py",
        "outputs/./model.pt",
        "outputs//model.pt",
        "train.py",
        ".nightshift/credential",
        "outputs/missing.pt",
        "outputs/model.pt\x00.txt",
        "outputs/link",
        "outputs/linked-folder/x",
        "outputs",
    ],
)
def test_a_file_outside_the_outputs_or_a_link_is_refused_and_nothing_is_made(
    people, finished_job, hostile, tmp_path
):
    secret = tmp_path / "secret.txt"
    secret.write_text("the portal's own")
    job = finished_job(people.student, lab=people.lab.name)
    os.symlink(secret, job.directory / "outputs" / "link")
    os.symlink(tmp_path, job.directory / "outputs" / "linked-folder")
    response = publish(people.student, job, files=[hostile])
    assert response.status_code == 400, response.json()
    fields = response.json()["error"]["fields"]
    message = str(fields.get("files") or fields)
    assert (
        "is not one of the job's output files" in message
        or "cannot be used" in message
        or "Null characters are not allowed" in message
    ), fields
    assert not ModelVersion.objects.exists()


@pytest.mark.parametrize(
    "hostile",
    ["../up", "a b", "$(touch x)", "x;rm", "", ".hidden", "a/b", "x" * 81, "name\nqueue 5"],
)
def test_a_name_that_cannot_be_a_folder_is_refused(people, finished_job, hostile):
    job = finished_job(people.student, lab=people.lab.name)
    response = publish(people.student, job, name=hostile)
    assert response.status_code == 400 and "name" in response.json()["error"]["fields"]
    assert not ModelVersion.objects.exists()


def test_only_an_ended_job_of_ones_own_is_published(people, finished_job, fake_bridge):
    job = finished_job(people.student, lab=people.lab.name)
    assert publish(people.labmate, job).status_code == 404  # not theirs to read
    lead = publish(people.lead, job)  # a lead reads it, but it is not theirs to publish
    assert lead.status_code == 400
    assert lead.json()["error"]["fields"]["job"] == [
        "Only the job's owner may publish its outputs."
    ]
    running = (
        client_with_token(people.student)
        .post(
            reverse("api:job-list"),
            {
                "name": "still running",
                "gpus": 0,
                "script": _script(),
                "lab": people.lab.name,
            },
            format="multipart",
        )
        .json()
    )
    from jobs.models import Job

    refused = publish(people.student, Job.objects.get(public_id=running["id"]))
    assert refused.json()["error"]["fields"]["job"] == [
        "Publish a job's outputs once it has ended and they are ready."
    ]


def _script():
    from tests.conftest import script_upload

    return script_upload()


def test_a_lab_is_needed_and_must_be_ones_own(people, finished_job):
    job = finished_job(people.student)  # charged to their first lab: Vision & Robotics
    assert publish(people.student, job, lab="Other Lab").json()["error"]["fields"]["lab"] == [
        "You are not a member of Other Lab."
    ]
    loner = finished_job(_loner())
    assert publish(loner.owner, loner).json()["error"]["fields"]["lab"] == [
        "A model belongs to a lab: choose one of yours."
    ]


def _loner():
    from tests.factories import UserFactory

    return UserFactory(username="loner")


def test_publishing_for_everyone_is_for_the_labs_leads(people, finished_job):
    job = finished_job(people.student, lab=people.lab.name)
    refused = publish(people.student, job, visibility="site")
    assert (
        "Only Vision & Robotics's leads (and admins) publish for everyone"
        in (refused.json()["error"]["fields"]["visibility"][0])
    )
    lead_job = finished_job(people.lead, lab=people.lab.name)
    assert published(people.lead, lead_job, visibility="site")["visibility"] == "site"


def test_a_labmate_may_not_add_versions_to_anothers_model_but_a_lead_may(people, finished_job):
    published(people.student, finished_job(people.student, lab=people.lab.name))
    response = publish(people.labmate, finished_job(people.labmate, lab=people.lab.name))
    assert (
        "only its first publisher or the lab's leads may add versions"
        in (response.json()["error"]["fields"]["name"][0])
    )
    lead = published(people.lead, finished_job(people.lead, lab=people.lab.name))
    assert lead["number"] == 2


def test_two_files_that_would_have_the_same_path_are_refused(people, finished_job):
    job = finished_job(
        people.student,
        lab=people.lab.name,
        files={"outputs/model.pt": b"a", "model.pt": b"b"},
        keep_outputs=["outputs", "model.pt"],
    )
    response = publish(people.student, job, files=["outputs/model.pt", "model.pt"])
    assert "would both be model.pt in the model" in response.json()["error"]["fields"]["files"][0]


def test_the_api_lists_models_with_search_and_filters(people, finished_job):
    published(
        people.student,
        finished_job(people.student, lab=people.lab.name),
        name="resnet",
        card="An image classifier.",
    )
    published(
        people.student,
        finished_job(people.student, lab=people.lab.name),
        name="bert",
        card="A text model.",
        visibility="private",
    )
    api = people.api(people.student)
    assert [v["name"] for v in api.get(MODELS).json()["results"]] == ["bert", "resnet"]
    assert [v["name"] for v in api.get(MODELS, {"q": "image"}).json()["results"]] == ["resnet"]
    assert [v["name"] for v in api.get(MODELS, {"visibility": "private"}).json()["results"]] == [
        "bert"
    ]
    assert api.get(MODELS, {"lab": "vision_robotics"}).json()["count"] == 2
    assert api.get(MODELS, {"lab": "no_such"}).status_code == 404
    assert api.get(MODELS, {"q": "x\x00y", "lab": "a\x00b"}).status_code in (200, 404)


def test_published_models_count_against_the_publishers_storage_quota(
    people, finished_job, settings
):
    settings.DATASET_QUOTA_GB = 1500 / 10**9  # room for one model.pt (1,100 bytes), not two
    published(people.student, finished_job(people.student, lab=people.lab.name))
    second = publish(
        people.student,
        finished_job(people.student, lab=people.lab.name, files={"outputs/model.pt": b"x" * 1000}),
        name="other",
    )
    assert second.status_code == 400
    assert "Your datasets and models may keep" in second.json()["error"]["fields"]["files"][0]
    assert ModelVersion.objects.count() == 1
