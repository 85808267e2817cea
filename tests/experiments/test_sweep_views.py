"""A sweep from the job form, and the sweep's page."""

import csv
import io
import json

import pytest
from django.urls import reverse

from experiments import preparation, sweeps
from experiments.models import Sweep
from jobs import specs
from jobs.models import Job
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db


def post_form(client, **fields):
    data = {
        "name": "lr sweep",
        "gpus": 0,
        "cpus": 1,
        "memory_gb": 0.25,
        "arguments": "--lr={lr}\n--batch\n{batch}",
        "script": script_upload(),
        "sweep_grid": "lr = 0.1, 0.01, 0.001\r\nbatch = 32, 64\r\n",
    } | fields
    return client.post(reverse("jobs:new"), data)


def test_a_grid_on_the_job_form_submits_a_sweep_and_shows_its_page(student_client, fake_bridge):
    response = post_form(student_client)
    sweep = Sweep.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("jobs:sweep", args=[sweep.public_id])
    runs = list(sweep.runs.order_by("sweep_index"))
    assert len(runs) == 6
    assert runs[1].request["arguments"] == ["--lr=0.1", "--batch", "64"]
    assert runs[1].parameters == {"lr": 0.1, "batch": 64}

    page = student_client.get(response["Location"]).content.decode()
    assert "6 runs" in page
    assert ">lr</a></th>" in page and ">batch</a></th>" in page
    assert page.count('data-job="') == 6
    assert "Waiting for the scheduler" in page


def test_a_bad_grid_line_is_explained_on_the_form_and_nothing_is_kept(student_client, fake_bridge):
    response = post_form(student_client, sweep_grid="lr 0.1, 0.2")
    assert response.status_code == 400
    assert "Line 1: write name = value, value" in response.content.decode()
    assert not Job.objects.exists()


def test_a_placeholder_without_a_parameter_is_explained_on_the_form(student_client, fake_bridge):
    response = post_form(student_client, sweep_grid="lr = 1, 2")
    assert response.status_code == 400
    assert "{batch} names no parameter of this sweep" in response.content.decode()
    assert not Sweep.objects.exists()


def test_a_run_page_links_back_to_its_sweep(student_client, fake_bridge):
    post_form(student_client)
    run = Job.objects.get(sweep_index=2)
    page = student_client.get(reverse("jobs:detail", args=[run.public_id])).content.decode()
    assert reverse("jobs:sweep", args=[run.sweep.public_id]) in page
    assert "run 2: lr = 0.01, batch = 32" in page


def test_another_students_sweep_page_is_a_404(client, other_student, student, fake_bridge):
    sweep = sweeps.sweep_submit(
        user=student,
        spec=specs.JobSpec(name="mine", arguments=["{x}"]),
        plan=sweeps.SweepPlan.from_json({"grid": {"x": [1]}}),
        script=script_upload(),
    )
    client.force_login(other_student)
    assert client.get(reverse("jobs:sweep", args=[sweep.public_id])).status_code == 404


def test_the_owner_cancels_every_run_from_the_sweep_page(student_client, fake_bridge):
    post_form(student_client)
    sweep = Sweep.objects.get()
    page = student_client.get(reverse("jobs:sweep", args=[sweep.public_id])).content.decode()
    assert "Cancel all runs" in page
    response = student_client.post(
        reverse("jobs:sweep_cancel", args=[sweep.public_id]), follow=True
    )
    assert "Cancelling 6 runs of “lr sweep”." in response.content.decode()
    assert set(sweep.runs.values_list("state", flat=True)) == {"removed"}
    assert "Cancel all runs" not in response.content.decode()


def log_metrics(run, losses):
    metrics = run.directory / ".nightshift" / "metrics.jsonl"
    metrics.write_text(
        "".join(
            json.dumps({"step": step, "time": 1.0 + step, "loss": loss, "acc": 1 - loss}) + "\n"
            for step, loss in enumerate(losses)
        )
    )


@pytest.fixture
def sweep_with_metrics(student_client, fake_bridge):
    post_form(student_client)
    sweep = Sweep.objects.get()
    runs = list(sweep.runs.order_by("sweep_index"))
    for run, losses in zip(
        runs, [[0.9, 0.5], [0.8, 0.2, 0.3], [0.7], [], [0.95, 0.6], [1.0]], strict=True
    ):
        if losses:
            log_metrics(run, losses)
    return sweep


def test_the_best_run_is_named_and_marked_by_the_lowest_loss(student_client, sweep_with_metrics):
    url = reverse("jobs:sweep", args=[sweep_with_metrics.public_id])
    page = student_client.get(url).content.decode()
    assert "Best loss (lowest): <strong>0.2</strong>, run" in page
    assert page.count('class="best"') == 1
    assert 'data-index="1" class="best"' in page
    # The final value is the last step's, not the best.
    row = page.split('data-index="1"')[1].split("</tr>")[0]
    assert "<td>0.3</td>" in row


def test_another_metric_and_goal_change_the_best_run(student_client, sweep_with_metrics):
    url = reverse("jobs:sweep", args=[sweep_with_metrics.public_id])
    page = student_client.get(url, {"metric": "acc"}).content.decode()
    assert "Best acc (highest): <strong>0.8</strong>" in page
    page = student_client.get(url, {"metric": "loss", "goal": "max"}).content.decode()
    assert "Best loss (highest): <strong>1</strong>" in page


def test_runs_sort_by_best_with_those_without_metrics_last(student_client, sweep_with_metrics):
    url = reverse("jobs:sweep", args=[sweep_with_metrics.public_id])
    page = student_client.get(url, {"sort": "best"}).content.decode()
    order = [int(part.split('"')[0]) for part in page.split('data-index="')[1:]]
    assert order == [1, 0, 4, 2, 5, 3]
    page = student_client.get(url, {"sort": "-p.lr"}).content.decode()
    order = [int(part.split('"')[0]) for part in page.split('data-index="')[1:]]
    assert order[:2] == [0, 1]  # lr 0.1 first, in index order


def test_the_results_export_as_csv(student_client, sweep_with_metrics):
    url = reverse("jobs:sweep_results_csv", args=[sweep_with_metrics.public_id])
    response = student_client.get(url, {"sort": "best"})
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][:4] == ["index", "job_id", "lr", "batch"]
    assert rows[0][5:7] == ["final_loss", "best_loss"]
    assert [row[0] for row in rows[1:]] == ["1", "0", "4", "2", "5", "3"]
    assert rows[1][2:4] == ["0.1", "64"] and rows[1][6] == "0.2"


def test_the_best_runs_parameters_become_a_new_job_from_the_form(
    student_client, sweep_with_metrics
):
    page = student_client.get(reverse("jobs:sweep", args=[sweep_with_metrics.public_id]))
    best = sweep_with_metrics.runs.get(sweep_index=1)
    link = f"{reverse('jobs:new')}?from={best.public_id}"
    assert link in page.content.decode()
    form = student_client.get(link).content.decode()
    assert "--lr=0.1\n--batch\n64" in form
    assert "NIGHTSHIFT_PARAMETERS" not in form


def test_an_evaluation_matrix_from_its_form(student_client, fake_bridge):
    from django.core.files.uploadedfile import SimpleUploadedFile

    form = student_client.get(reverse("jobs:matrix_new")).content.decode()
    assert "New evaluation matrix" in form and 'name="system_file_0"' in form
    response = student_client.post(
        reverse("jobs:matrix_new"),
        {
            "name": "eval",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 0.25,
            "arguments": "{dataset}",
            "system_name_0": "bert",
            "system_file_0": script_upload(name="bert.py"),
            "system_name_1": "t5",
            "system_file_1": script_upload(name="t5.py"),
            "dataset_name_0": "squad",
            "dataset_path_0": "/shared/squad",
            "dataset_name_1": "tiny",
            "dataset_file_1": SimpleUploadedFile("tiny.csv", b"1\n"),
        },
    )
    sweep = Sweep.objects.get()
    assert response.status_code == 302, response.content.decode()[-3000:]
    assert response["Location"] == reverse("jobs:sweep", args=[sweep.public_id])
    assert sorted(sweep.runs.values_list("request__arguments", flat=True)) == [
        ["/shared/squad"],
        ["/shared/squad"],
        ["dataset"],
        ["dataset"],
    ]
    page = student_client.get(response["Location"]).content.decode()
    assert 'data-role="matrix"' in page


def test_a_half_filled_matrix_row_is_explained(student_client, fake_bridge):
    response = student_client.post(
        reverse("jobs:matrix_new"),
        {
            "name": "eval",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 0.25,
            "system_name_0": "bert",
            "dataset_name_0": "squad",
            "dataset_path_0": "/d",
        },
    )
    assert response.status_code == 400
    assert "System row 1: give a name and a file." in response.content.decode()
    assert not Sweep.objects.exists()


def test_a_hyperparameter_study_from_its_form(student_client, fake_bridge, monkeypatch):
    from experiments import studies

    monkeypatch.setattr(studies, "_enqueue_advance", lambda sweep_pk: None)
    response = student_client.post(
        reverse("jobs:study_new"),
        {
            "name": "search",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 0.25,
            "script": script_upload(),
            "arguments": "--lr={lr}\n--opt={optimizer}",
            "space": "lr = log_uniform 1e-5 0.1\r\noptimizer = choice adam sgd",
            "objective": "val_loss",
            "direction": "minimize",
            "max_trials": 8,
            "parallel": 2,
            "sampler": "tpe",
            "pruner": "median",
        },
    )
    sweep = Sweep.objects.get()
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert sweep.kind == "study"
    assert sweep.definition["space"]["optimizer"] == {"kind": "choice", "choices": ["adam", "sgd"]}
    bad = student_client.post(
        reverse("jobs:study_new"),
        {
            "name": "search",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 0.25,
            "script": script_upload(),
            "space": "lr = log_uniform small big",
            "objective": "loss",
            "direction": "minimize",
            "max_trials": 8,
            "parallel": 2,
            "sampler": "tpe",
            "pruner": "median",
        },
    )
    assert bad.status_code == 400
    assert "Line 1: log_uniform needs its lowest and highest value." in bad.content.decode()


def test_parameter_sets_from_a_csv_on_the_job_form(student_client, fake_bridge):
    from django.core.files.uploadedfile import SimpleUploadedFile

    rows = SimpleUploadedFile("sets.csv", b"lr,batch\n0.1,32\n0.05,128\n")
    response = post_form(student_client, sweep_grid="", sweep_rows=rows)
    sweep = Sweep.objects.get()
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert sweep.kind == "list"
    assert list(sweep.runs.order_by("sweep_index").values_list("parameters", flat=True)) == [
        {"lr": 0.1, "batch": 32},
        {"lr": 0.05, "batch": 128},
    ]


def test_random_samples_on_the_job_form_are_reproducible(student_client, fake_bridge):
    fields = {
        "sweep_grid": "",
        "sweep_random": "lr = log_uniform 1e-5 0.1\r\nbatch = choice 32 64",
        "sweep_count": 3,
        "sweep_seed": 5,
    }
    post_form(student_client, **fields)
    post_form(student_client, **fields)
    first, second = Sweep.objects.order_by("pk")
    assert first.kind == "random" and first.runs.count() == 3
    assert list(first.runs.order_by("sweep_index").values_list("parameters", flat=True)) == list(
        second.runs.order_by("sweep_index").values_list("parameters", flat=True)
    )


def test_a_sweep_described_two_ways_or_without_a_count_is_explained(student_client, fake_bridge):
    both = post_form(student_client, sweep_random="lr = uniform 0 1", sweep_count=2)
    assert both.status_code == 400
    assert "Describe the sweep one way" in both.content.decode()
    uncounted = post_form(student_client, sweep_grid="", sweep_random="lr = uniform 0 1")
    assert "Say how many random samples to run." in uncounted.content.decode()
    assert not Sweep.objects.exists()


def test_a_large_sweep_answers_at_once_and_its_page_shows_the_runs_being_written(
    student_client, fake_bridge, settings
):
    settings.SWEEP_RUNS_IN_REQUEST = 4
    response = post_form(student_client)
    sweep = Sweep.objects.get()
    assert response.status_code == 302 and not sweep.runs.exists()
    page = student_client.get(response["Location"]).content.decode()
    assert "“lr sweep”: 6 runs are on their way to the pool." in page
    assert "Writing its runs: <strong>0</strong> of 6" in page
    progress = reverse("jobs:sweep_progress", args=[sweep.public_id])
    assert f'data-fragment-url="{progress}"' in page
    assert "Cancel all runs" in page

    preparation.sweep_prepare(sweep.pk)
    fragment = student_client.get(progress).content.decode()
    assert "Its runs are written; handing them to HTCondor" in fragment
    sweeps.sweep_submit_to_pool(sweep.pk)
    fragment = student_client.get(progress).content.decode()
    assert 'data-all-final="true"' in fragment and "as cluster 1" in fragment
    assert "data-fragment-url" not in student_client.get(response["Location"]).content.decode()


def test_another_students_sweep_progress_is_a_404(client, other_student, student, fake_bridge):
    sweep = sweeps.sweep_submit(
        user=student,
        spec=specs.JobSpec(name="s", arguments=["{lr}"]),
        plan=sweeps.SweepPlan.from_json({"grid": {"lr": [1, 2]}}),
        script=script_upload(),
    )
    client.force_login(other_student)
    assert client.get(reverse("jobs:sweep_progress", args=[sweep.public_id])).status_code == 404


def test_a_sweep_whose_runs_could_not_all_be_written_says_so_while_it_tries_again(
    student_client, fake_bridge, settings
):
    settings.SWEEP_RUNS_IN_REQUEST = 4
    post_form(student_client)
    sweep = Sweep.objects.get()
    Sweep.objects.filter(pk=sweep.pk).update(
        last_error="Writing its runs stopped at 0 of 6 (OSError); Nightshift tries again."
    )
    fragment = student_client.get(reverse("jobs:sweep_progress", args=[sweep.public_id]))
    assert "Writing its runs stopped at 0 of 6 (OSError)" in fragment.content.decode()
    page = student_client.get(reverse("jobs:sweep", args=[sweep.public_id])).content.decode()
    assert page.count("Writing its runs stopped") == 1
