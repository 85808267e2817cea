"""A published model attached to a new job: the job's launcher (a real process) fetches it
from the portal (a real HTTP server) with the job's own credential and finds it read-only at
models/<name>/; what the job records of it, what a clone keeps, and what is refused."""

import json

import pytest
from django.urls import reverse

from datasets import storage
from datasets.models import DatasetDelivery
from jobs.inputs import DATASETS_MANIFEST
from jobs.models import Job
from tests.conftest import WEIGHTS, client_with_token, script_upload
from tests.datasets.test_delivery import launch
from tests.model_registry.conftest import published

pytestmark = pytest.mark.django_db(transaction=True)

READER = """
import os, nightshift
folder = nightshift.model_path("bert-small")
print("weights", len(open(os.path.join(folder, "model.pt"), "rb").read()))
print("files", sorted(os.listdir(folder)))
try:
    nightshift.model_path("gpt")
except LookupError as exc:
    print("lookup:", exc)
"""


@pytest.fixture
def portal(live_server, settings, fake_bridge):
    settings.PORTAL_URL = live_server.url
    return live_server


def submit(user, models, *, script=READER, **fields):
    return client_with_token(user).post(
        reverse("api:job-list"),
        {
            "name": "evaluate",
            "gpus": 0,
            "script": script_upload(script),
            "models": models,
            **fields,
        },
        format="multipart",
    )


def test_a_labmates_job_reads_the_published_model_at_models_name(
    people, finished_job, portal, tmp_path
):
    version = published(
        people.student,
        finished_job(people.student, lab=people.lab.name),
        files=["outputs/model.pt", "outputs/tokenizer/vocab.txt"],
    )
    response = submit(people.labmate, ["vision_robotics/bert-small"])
    assert response.status_code == 201, response.json()
    job = Job.objects.get(public_id=response.json()["id"])
    [record] = job.source["models"]
    assert (record["reference"], record["folder"], record["sha256"]) == (
        "vision_robotics/bert-small@1",
        "models",
        version["sha256"],
    )
    manifest = json.loads((job.directory / ".nightshift" / DATASETS_MANIFEST).read_text())
    assert [d["folder"] for d in manifest["datasets"]] == ["models"]
    ran = launch(job, tmp_path / "cache")
    assert ran.returncode == 0, ran.stderr
    assert f"weights {len(WEIGHTS)}" in ran.stdout
    assert "files ['model.pt', 'tokenizer']" in ran.stdout
    assert "this job has no model 'gpt'; it has bert-small" in ran.stdout
    assert not (job.directory / "datasets").exists()
    assert DatasetDelivery.objects.filter(job=job, sha256=version["sha256"]).count() == 1
    # The record, the API's reproducibility record and a clone all keep the exact version.
    shown = (
        client_with_token(people.labmate)
        .get(reverse("api:job-detail", args=[job.public_id]))
        .json()
    )
    assert [m["reference"] for m in shown["reproducibility"]["models"]] == [
        "vision_robotics/bert-small@1"
    ]
    assert shown["reproducibility"]["datasets"] == []
    from jobs.specs import job_spec_of

    assert job_spec_of(job).models == ["vision_robotics/bert-small@1"]


def test_a_model_whose_files_a_dataset_also_holds_outlives_that_datasets_deletion(
    people, finished_job, portal
):
    version = published(people.student, finished_job(people.student, lab=people.lab.name))
    from datasets.models import Dataset, DatasetVersion
    from datasets.services import dataset_delete

    dataset = Dataset.objects.create(name="same", owner=people.student)
    DatasetVersion.objects.create(
        dataset=dataset,
        number=1,
        sha256=version["sha256"],
        size_bytes=1,
        file_count=1,
        source="upload",
    )
    dataset_delete(user=people.student, dataset=dataset)
    assert storage.archive_path(version["sha256"]).is_file()


@pytest.mark.parametrize(
    "hostile",
    [
        "../../etc",
        "vision_robotics/../x",
        "$(touch /tmp/x)/m",
        "lab/m@1;rm -rf /",
        "lab/m\nqueue 5",
        "lab/m@-1",
        "lab/m@",
        "/m",
        "lab/",
        "lab/m@1@2",
        "la b/m",
        "bert-small",
    ],
)
def test_a_hostile_reference_is_refused_and_no_job_is_made(people, hostile):
    response = submit(people.student, [hostile])
    assert response.status_code == 400
    [message] = response.json()["error"]["fields"]["models"]
    assert "is not a model: give LAB/NAME or LAB/NAME@VERSION" in message
    assert Job.objects.count() == 0


def test_two_models_of_one_name_and_a_missing_version_are_refused(people, finished_job):
    published(people.student, finished_job(people.student, lab=people.lab.name))
    twice = submit(people.student, ["vision_robotics/bert-small", "vision_robotics/bert-small@1"])
    assert "Two models are called bert-small" in twice.json()["error"]["fields"]["models"][0]
    missing = submit(people.student, ["vision_robotics/bert-small@9"])
    assert (
        "There is no model vision_robotics/bert-small@9"
        in (missing.json()["error"]["fields"]["models"][0])
    )


def test_the_job_form_offers_the_models_one_may_use_and_a_models_page_links_to_it(
    people, finished_job, client
):
    published(people.student, finished_job(people.student, lab=people.lab.name))
    client.force_login(people.labmate)
    form = client.get(reverse("jobs:new") + "?model=vision_robotics/bert-small@1").content.decode()
    assert 'value="vision_robotics/bert-small@1"' in form and "checked" in form
    client.force_login(people.outsider)
    assert "bert-small" not in client.get(reverse("jobs:new")).content.decode()


def test_where_htcondor_moves_the_files_its_plugin_brings_the_model_too(
    people, finished_job, portal, tmp_path
):
    from urllib.parse import urlsplit

    from tests.datasets.test_transfer_plugin import machine_ad, transfer

    version = published(people.student, finished_job(people.student, lab=people.lab.name))
    job = Job.objects.get(
        public_id=submit(people.labmate, ["vision_robotics/bert-small"]).json()["id"]
    )
    assert job.request["dataset_urls"] == [
        f"nightshift://{urlsplit(portal.url).netloc}/{version['sha256']}"
    ]
    cache = tmp_path / "cache"
    ran, [result] = transfer(job, machine_ad(tmp_path, NightshiftDataCache=cache))
    assert ran.returncode == 0 and result["TransferSuccess"] == "true", ran.stdout + ran.stderr
    started = launch(job, cache)
    assert started.returncode == 0, started.stderr
    assert f"weights {len(WEIGHTS)}" in started.stdout


def test_a_sweeps_runs_each_read_the_model(people, finished_job):
    from experiments.models import Sweep

    published(people.student, finished_job(people.student, lab=people.lab.name))
    response = client_with_token(people.labmate).post(
        reverse("api:sweep-list"),
        {
            "name": "evaluate at two temperatures",
            "gpus": 0,
            "script": script_upload(READER),
            "models": ["vision_robotics/bert-small"],
            "arguments": ["--t={t}"],
            "parameters": json.dumps({"grid": {"t": [0.5, 1.0]}}),
        },
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    runs = list(Sweep.objects.get().runs.order_by("sweep_index"))
    assert [run.source["models"][0]["reference"] for run in runs] == [
        "vision_robotics/bert-small@1"
    ] * 2
    manifests = [run.directory / ".nightshift" / DATASETS_MANIFEST for run in runs]
    assert all(json.loads(m.read_text())["datasets"][0]["folder"] == "models" for m in manifests)


SCORER = """
import os, sys
folder = sys.argv[1]
print("scored", folder, len(open(os.path.join(folder, "model.pt"), "rb").read()))
"""


def test_an_evaluation_matrix_takes_model_versions_as_its_systems(
    people, finished_job, portal, tmp_path
):
    from experiments.models import Sweep

    for weights in (b"v1" * 10, b"v2" * 30):
        job = finished_job(people.student, lab=people.lab.name, files={"outputs/model.pt": weights})
        published(people.student, job, visibility="lab")
    systems = [
        {"name": f"bert v{n}", "file": "score.py", "model": f"vision_robotics/bert-small@{n}"}
        for n in (1, 2)
    ]
    response = client_with_token(people.labmate).post(
        reverse("api:sweep-matrix"),
        {
            "name": "which version",
            "gpus": 0,
            "arguments": ["{model}"],
            "systems": json.dumps(systems),
            "system_files": [script_upload(SCORER, "score.py")],
            "datasets": json.dumps([{"name": "reviews", "path": "/shared/reviews"}]),
        },
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    runs = list(Sweep.objects.get().runs.order_by("sweep_index"))
    assert [run.parameters["system"] for run in runs] == ["bert v1", "bert v2"]
    for run, size in zip(runs, (20, 60), strict=True):
        ran = launch(run, tmp_path / "cache")
        assert ran.returncode == 0, ran.stderr
        assert f"scored models/bert-small {size}" in ran.stdout


def test_a_matrix_system_naming_a_model_one_may_not_use_is_refused(people, finished_job):
    published(people.student, finished_job(people.student, lab=people.lab.name), visibility="lab")
    response = client_with_token(people.outsider).post(
        reverse("api:sweep-matrix"),
        {
            "name": "peek",
            "gpus": 0,
            "arguments": ["{model}"],
            "systems": json.dumps(
                [{"name": "theirs", "file": "score.py", "model": "vision_robotics/bert-small"}]
            ),
            "system_files": [script_upload(SCORER, "score.py")],
            "datasets": json.dumps([{"name": "reviews", "path": "/shared/reviews"}]),
        },
        format="multipart",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert "systems" in error["fields"] and error["message"].startswith("theirs:")


def test_the_matrix_form_takes_models_as_systems_sharing_the_first_rows_script(
    people, finished_job, client
):
    from experiments.models import Sweep

    published(people.student, finished_job(people.student, lab=people.lab.name), visibility="lab")
    client.force_login(people.labmate)
    response = client.post(
        reverse("jobs:matrix_new"),
        {
            "name": "eval",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 0.25,
            "arguments": "{system}",
            "system_name_0": "baseline",
            "system_file_0": script_upload(SCORER, "score.py"),
            "system_name_1": "bert",
            "system_model_1": "vision_robotics/bert-small@1",
            "dataset_name_0": "squad",
            "dataset_path_0": "/shared/squad",
        },
    )
    assert response.status_code == 302, response.content.decode()[-3000:]
    sweep = Sweep.objects.get()
    runs = {run.parameters["system"]: run for run in sweep.runs.all()}
    assert runs["baseline"].source.get("models") is None
    assert runs["bert"].source["models"][0]["reference"] == "vision_robotics/bert-small@1"
    assert runs["bert"].request["script_name"] == "score.py"
    assert sweep.definition["systems"][1]["model"] == "vision_robotics/bert-small@1"
