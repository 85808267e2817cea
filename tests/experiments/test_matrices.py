"""Evaluation matrices: K systems by M datasets, as one sweep."""

import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from experiments import matrices, sweeps
from experiments.models import Sweep
from jobs import specs
from jobs.models import Job
from tests.conftest import client_with_token, script_upload
from tests.jobs.test_projects import project

pytestmark = pytest.mark.django_db


def archive(members: dict, name: str) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as target:
        for member, data in members.items():
            target.writestr(member, data)
    return SimpleUploadedFile(name, buffer.getvalue())


def systems():
    return [
        matrices.MatrixSystem(
            "bert",
            project({"eval.py": "print('bert')"}, name="bert.zip"),
            "python eval.py --data {dataset}",
        ),
        matrices.MatrixSystem("t5", script_upload("print('t5')", name="t5.py")),
    ]


def datasets():
    return [
        matrices.MatrixDataset("squad", path="/shared/data/squad"),
        matrices.MatrixDataset("glue", upload=archive({"dev.tsv": "a\tb\n"}, "glue.zip")),
        matrices.MatrixDataset("tiny", upload=SimpleUploadedFile("tiny.csv", b"1,2\n")),
    ]


def submit(user, **spec):
    spec.setdefault("name", "eval")
    spec.setdefault("arguments", ["--system", "{system}"])
    return matrices.matrix_submit(
        user=user, spec=specs.JobSpec(**spec), systems=systems(), datasets=datasets()
    )


def test_every_system_runs_on_every_dataset_with_its_own_files(student, fake_bridge):
    sweep = submit(student)
    runs = {(r.parameters["system"], r.parameters["dataset"]): r for r in sweep.runs.all()}
    assert len(runs) == 6 and sweep.kind == Sweep.Kind.MATRIX
    bert_squad = runs[("bert", "squad")]
    assert bert_squad.request["arguments"] == ["--data", "/shared/data/squad", "--system", "bert"]
    assert (bert_squad.directory / "eval.py").read_text() == "print('bert')"
    assert not (bert_squad.directory / "dataset").exists()
    t5_glue = runs[("t5", "glue")]
    assert t5_glue.request["script_name"] == "t5.py"
    assert t5_glue.request["arguments"] == ["--system", "t5"]
    assert (t5_glue.directory / "dataset" / "dev.tsv").read_text() == "a\tb\n"
    assert (runs[("bert", "tiny")].directory / "dataset" / "tiny.csv").read_text() == "1,2\n"
    assert "dataset" in t5_glue.request["input_files"]
    # One cluster for all six, as for any sweep.
    sweeps.sweep_submit_to_pool(sweep.pk)
    assert fake_bridge.submit_calls == 1
    assert len(set(sweep.runs.values_list("cluster_id", flat=True))) == 1


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"systems": []}, "systems", "at least one system"),
        ({"datasets": []}, "datasets", "at least one dataset"),
        (
            {
                "datasets": [
                    matrices.MatrixDataset("a", path="/x"),
                    matrices.MatrixDataset("a", path="/y"),
                ]
            },
            "datasets",
            "same name",
        ),
        ({"datasets": [matrices.MatrixDataset("a")]}, "datasets", "a path or a file"),
        (
            {"datasets": [matrices.MatrixDataset("a", path="/x\nqueue 1000")]},
            "datasets",
            "line breaks",
        ),
        (
            {
                "systems": [
                    matrices.MatrixSystem(
                        "s", project({"run.py": "1"}, name="s.zip"), "python eval.py"
                    )
                ]
            },
            "entry_command",
            "no eval.py",
        ),
    ],
)
def test_a_bad_matrix_is_refused_whole(student, fake_bridge, settings, change, field, message):
    arguments = {"systems": systems(), "datasets": datasets()} | change
    with pytest.raises(specs.JobSubmissionError, match=message) as refused:
        matrices.matrix_submit(user=student, spec=specs.JobSpec(name="m"), **arguments)
    assert refused.value.field == field
    assert not Job.objects.exists()
    left = settings.JOBS_DIR.iterdir() if settings.JOBS_DIR.exists() else []
    assert [path.name for path in left if path.name != ".staging"] == []
    assert not any((settings.JOBS_DIR / ".staging").glob("matrix-*"))


def test_a_matrix_over_the_run_limit_is_refused(student, fake_bridge, settings):
    settings.MAX_SWEEP_RUNS = 5
    with pytest.raises(specs.JobSubmissionError, match="2 systems by 3 datasets make 6"):
        submit(student)


def test_the_sweep_page_shows_systems_by_datasets(student_client, student, fake_bridge):
    sweep = submit(student)
    run = sweep.runs.get(parameters__system="t5", parameters__dataset="glue")
    (run.directory / ".nightshift" / "metrics.jsonl").write_text('{"step": 1, "accuracy": 0.9}\n')
    page = student_client.get(reverse("jobs:sweep", args=[sweep.public_id])).content.decode()
    assert "Systems by datasets: highest accuracy" in page
    matrix = page.split('data-role="matrix"')[1].split("</table>")[0]
    assert '<th scope="col">squad</th><th scope="col">glue</th>' in matrix
    assert '<td class="best"><a href="/jobs/' in matrix and ">0.9</a>" in matrix


def test_the_api_takes_a_matrix_with_its_files(student, fake_bridge):
    api = client_with_token(student)
    response = api.post(
        reverse("api:sweep-matrix"),
        {
            "name": "eval",
            "gpus": 0,
            "arguments": ["--system", "{system}"],
            "systems": json.dumps(
                [
                    {
                        "name": "bert",
                        "file": "bert.zip",
                        "entry_command": "python eval.py {dataset}",
                    },
                    {"name": "t5", "file": "t5.py"},
                ]
            ),
            "system_files": [
                project({"eval.py": "1"}, name="bert.zip"),
                script_upload("1", name="t5.py"),
            ],
            "datasets": json.dumps(
                [{"name": "squad", "path": "/data/squad"}, {"name": "tiny", "file": "tiny.csv"}]
            ),
            "dataset_files": [SimpleUploadedFile("tiny.csv", b"1\n")],
        },
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["kind"] == "matrix" and body["run_count"] == 4
    assert {tuple(run["parameters"].values()) for run in body["runs"]} == {
        ("bert", "squad"),
        ("bert", "tiny"),
        ("t5", "squad"),
        ("t5", "tiny"),
    }


def test_the_api_names_a_file_that_was_not_uploaded(student, fake_bridge):
    response = client_with_token(student).post(
        reverse("api:sweep-matrix"),
        {
            "name": "eval",
            "systems": json.dumps([{"name": "a", "file": "missing.py"}]),
            "system_files": [script_upload("1", name="a.py")],
            "datasets": json.dumps([{"name": "d", "path": "/d"}]),
        },
        format="multipart",
    )
    assert response.status_code == 400
    assert (
        "no uploaded file is called 'missing.py'"
        in response.json()["error"]["fields"]["systems"][0]
    )


def test_hostile_names_and_file_names_stay_text_and_inside_the_run(student, fake_bridge, settings):
    evil = '$(HOME) "x" +Owner = "root"'
    sweep = matrices.matrix_submit(
        user=student,
        spec=specs.JobSpec(name="m", arguments=["{system}", "{dataset}"]),
        systems=[matrices.MatrixSystem(evil, script_upload("1", name="a.py"))],
        datasets=[
            matrices.MatrixDataset("d1", path="/data/$(HOME) 'q'"),
            matrices.MatrixDataset(
                "d2", upload=SimpleUploadedFile("../../evil\u202e;rm.csv", b"1")
            ),
        ],
    )
    runs = {r.parameters["dataset"]: r for r in sweep.runs.all()}
    assert runs["d1"].request["arguments"] == [evil, "/data/$(HOME) 'q'"]
    sweeps.sweep_submit_to_pool(sweep.pk)
    arguments = fake_bridge.submitted[str(runs["d1"].public_id)]["arguments"]
    assert "$(DOLLAR)(HOME)" in arguments and "$(HOME)" not in arguments
    uploaded = list((runs["d2"].directory / "dataset").iterdir())
    assert [path.name for path in uploaded] == ["evil_rm.csv"]
    # Nothing lands outside the run's dataset folder.
    assert list(settings.JOBS_DIR.parent.rglob("evil*")) == uploaded
