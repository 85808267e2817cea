"""`nightshift sweep` and `nightshift sweeps`, run as a user runs them, against a live server."""

import json

import pytest

from experiments.models import Sweep
from jobs import sync
from jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fake_pool(fake_bridge):
    return fake_bridge


def test_a_grid_sweep_is_submitted_and_its_runs_listed(nightshift, logged_in, tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    done = nightshift(
        "sweep",
        "train.py",
        "--gpus",
        "0",
        "--arg=--lr={lr}",
        "--arg={batch}",
        "--grid",
        "lr=0.1,0.01",
        "--grid",
        "batch=32,64",
        "--name",
        "lr sweep",
    )
    assert done.status == 0, done.stderr
    sweep = Sweep.objects.get()
    assert "Submitted sweep “lr sweep” with 4 runs" in done.stderr
    assert sorted(tuple(r) for r in Job.objects.values_list("request__arguments", flat=True)) == [
        ("--lr=0.01", "32"),
        ("--lr=0.01", "64"),
        ("--lr=0.1", "32"),
        ("--lr=0.1", "64"),
    ]
    listing = nightshift("sweeps")
    assert str(sweep.public_id)[:8] in listing.stdout and "lr sweep" in listing.stdout
    shown = nightshift("sweeps", str(sweep.public_id))
    # Submitted to the (fake) pool as one cluster by the time it is shown.
    assert "lr sweep: 4 runs (4 idle)" in shown.stdout
    assert "0.01" in shown.stdout
    as_json = json.loads(nightshift("sweeps", str(sweep.public_id), "--json").stdout)
    assert [run["parameters"] for run in as_json["runs"]][0] == {"lr": 0.1, "batch": 32}


def test_rows_come_from_a_csv_and_random_samples_from_ranges(nightshift, logged_in, tmp_path):
    (tmp_path / "eval.py").write_text("print('hi')\n")
    (tmp_path / "matrix.csv").write_text("system,data\nbert,squad\nt5,glue\n")
    rows = nightshift(
        "sweep", "eval.py", "--gpus", "0", "--arg={system}", "--arg={data}", "--rows", "matrix.csv"
    )
    assert rows.status == 0, rows.stderr
    drawn = nightshift(
        "sweep",
        "eval.py",
        "--gpus",
        "0",
        "--arg={lr}",
        "--arg={opt}",
        "--random",
        "lr=log_uniform:1e-5:0.1",
        "--random",
        "opt=choice:adam|sgd",
        "--count",
        "5",
        "--seed",
        "3",
        "--json",
    )
    assert drawn.status == 0, drawn.stderr
    assert json.loads(drawn.stdout)["run_count"] == 5
    assert Job.objects.filter(parameters__system="t5", parameters__data="glue").exists()


def test_mistakes_are_explained_without_a_traceback(nightshift, logged_in, tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    none = nightshift("sweep", "train.py", "--arg={lr}")
    assert none.status != 0 and "one of --grid, --rows or --random" in none.stderr
    unknown = nightshift("sweep", "train.py", "--gpus", "0", "--arg={epochs}", "--grid", "lr=1")
    assert unknown.status != 0
    assert "{epochs} names no parameter" in unknown.stderr
    assert "Traceback" not in unknown.stderr + none.stderr
    assert not Job.objects.exists()


def test_a_sweep_is_cancelled_from_the_command_line(nightshift, logged_in, tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    nightshift("sweep", "train.py", "--gpus", "0", "--arg={x}", "--grid", "x=1,2,3")
    sweep = Sweep.objects.get()
    done = nightshift("sweeps", str(sweep.public_id), "--cancel")
    assert done.status == 0, done.stderr
    assert "Cancelling the runs of" in done.stderr
    assert "3 runs" in done.stdout
    sync.jobs_sync()  # the pool's removal reaches the portal
    again = nightshift("sweeps", str(sweep.public_id), "--cancel")
    assert again.status != 0 and "already ended" in again.stderr


def test_an_evaluation_matrix_from_the_command_line(nightshift, logged_in, tmp_path):
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "eval.py").write_text("print('bert')\n")
    (tmp_path / "t5.py").write_text("print('t5')\n")
    (tmp_path / "tiny.csv").write_text("1,2\n")
    done = nightshift(
        "matrix",
        "--gpus",
        "0",
        "--name",
        "eval",
        "--arg={system}",
        "--system",
        "bert=bert",
        "--system",
        "t5=t5.py",
        "--system-entry",
        "bert=python eval.py --data {dataset}",
        "--dataset",
        "tiny=tiny.csv",
        "--dataset-path",
        "squad=/shared/squad",
    )
    assert done.status == 0, done.stderr
    assert "2 systems by 2 datasets, 4 runs" in done.stderr
    runs = {(job.parameters["system"], job.parameters["dataset"]): job for job in Job.objects.all()}
    assert runs[("bert", "squad")].request["arguments"] == ["--data", "/shared/squad", "bert"]
    assert (runs[("t5", "tiny")].directory / "dataset" / "tiny.csv").read_text() == "1,2\n"
    wrong = nightshift(
        "matrix", "--system", "a=t5.py", "--system-entry", "b=python x.py", "--dataset-path", "d=/d"
    )
    assert wrong.status != 0 and "--system-entry names no system: b" in wrong.stderr


def test_a_study_is_started_from_the_command_line(nightshift, logged_in, tmp_path, monkeypatch):
    from experiments import studies

    monkeypatch.setattr(studies, "_enqueue_advance", lambda sweep_pk: None)
    (tmp_path / "train.py").write_text("print('hi')\n")
    done = nightshift(
        "study",
        "train.py",
        "--gpus",
        "0",
        "--arg=--lr={lr}",
        "--arg={layers}",
        "--space",
        "lr=log_uniform:1e-5:0.1",
        "--space",
        "layers=int_uniform:2:8",
        "--objective",
        "val_loss",
        "--trials",
        "6",
        "--parallel",
        "2",
        "--seed",
        "3",
    )
    assert done.status == 0, done.stderr
    assert "up to 6 trials, 2 at a time" in done.stderr
    sweep = Sweep.objects.get()
    assert sweep.definition["space"]["layers"] == {"kind": "int_uniform", "low": 2, "high": 8}
    assert (sweep.definition["objective"], sweep.definition["direction"]) == (
        "val_loss",
        "minimize",
    )
    bad = nightshift("study", "train.py", "--objective", "loss", "--space", "lr=gauss:1:2")
    assert bad.status != 0 and "the kind is uniform" in bad.stderr


def test_a_sweeps_runs_are_compared_on_the_command_line(nightshift, logged_in, tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    nightshift("sweep", "train.py", "--gpus", "0", "--arg={lr}", "--grid", "lr=0.1,0.01")
    sweep = Sweep.objects.get()
    for job, loss in zip(sweep.runs.order_by("sweep_index"), [0.5, 0.25], strict=True):
        (job.directory / ".nightshift" / "metrics.jsonl").write_text(
            json.dumps({"step": 0, "loss": loss}) + "\n"
        )
    shown = nightshift("sweeps", str(sweep.public_id), "--results", "--sort", "best")
    assert shown.status == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[1].split()[:2] == ["1", "*"]  # the best run first, marked
    assert "* best (lowest loss): run 1, lr=0.01" in shown.stdout
    saved = nightshift("sweeps", str(sweep.public_id), "--csv", "results.csv")
    assert saved.status == 0, saved.stderr
    assert (tmp_path / "results.csv").read_text().startswith("index,job_id,lr,state,final_loss")
