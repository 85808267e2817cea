"""nightshift model: publish a finished job's outputs, list and show the model, pull it back
checked, and start a job from it with --model."""

import pytest

from jobs.models import Job
from tests.conftest import OUTPUTS, WEIGHTS
from tests.factories import LabFactory, MembershipFactory


@pytest.fixture
def ada_in_a_lab(logged_in):
    MembershipFactory(lab=LabFactory(name="NLP"), user=logged_in)
    return logged_in


def test_a_model_is_published_listed_shown_pulled_and_used(
    nightshift, ada_in_a_lab, finished_job, tmp_path
):
    job = finished_job(ada_in_a_lab)
    (tmp_path / "card.md").write_text("# Sentiment\n\nA small classifier.\n")
    published = nightshift(
        "model",
        "publish",
        str(job.public_id),
        "--name",
        "sentiment",
        "--file",
        "outputs/model.pt",
        "--file",
        "outputs/tokenizer/vocab.txt",
        "--card",
        "card.md",
    )
    assert published.status == 0, published.stderr
    assert "Published nlp/sentiment@1: 2 files, sha256" in published.stdout
    listed = nightshift("model", "list")
    assert "nlp/sentiment@1" in listed.stdout and "loss=0.7" in listed.stdout
    shown = nightshift("model", "show", "nlp/sentiment")
    assert "tokenizer/vocab.txt" in shown.stdout and "A small classifier." in shown.stdout
    assert "loss: final 0.7, best 0.5 at step 1" in shown.stdout
    pulled = nightshift("model", "pull", "nlp/sentiment@1", "-o", "copy")
    assert pulled.status == 0, pulled.stderr
    assert "2 files in copy/ (sha256 checked)" in pulled.stdout
    assert (tmp_path / "copy" / "model.pt").read_bytes() == WEIGHTS
    assert (tmp_path / "copy" / "tokenizer" / "vocab.txt").read_bytes() == (
        OUTPUTS["outputs/tokenizer/vocab.txt"]
    )
    (tmp_path / "eval.py").write_text("print('evaluating')\n")
    used = nightshift("submit", "eval.py", "--gpus", "0", "--model", "nlp/sentiment")
    assert used.status == 0, used.stderr
    evaluation = Job.objects.get(name="eval.py")
    assert [m["reference"] for m in evaluation.source["models"]] == ["nlp/sentiment@1"]


def test_refusals_say_why_and_exit_nonzero(nightshift, ada_in_a_lab, finished_job):
    job = finished_job(ada_in_a_lab)
    escaping = nightshift(
        "model", "publish", str(job.public_id), "--name", "m", "--file", "../../etc/passwd"
    )
    assert escaping.status != 0 and "is not one of the job's output files" in escaping.stderr
    assert nightshift("model", "pull", "not a reference").status != 0
    missing = nightshift("model", "show", "nlp/nothing")
    assert missing.status != 0 and "No model 'nlp/nothing' that you may use" in missing.stderr


def test_a_matrix_evaluates_a_published_model_as_a_system(
    nightshift, ada_in_a_lab, finished_job, tmp_path
):
    job = finished_job(ada_in_a_lab)
    assert (
        nightshift(
            "model",
            "publish",
            str(job.public_id),
            "--name",
            "sentiment",
            "--file",
            "outputs/model.pt",
        ).status
        == 0
    )
    (tmp_path / "score.py").write_text("import sys; print(sys.argv)\n")
    made = nightshift(
        "matrix",
        "--system",
        "v1=score.py",
        "--system-model",
        "v1=nlp/sentiment@1",
        "--dataset-path",
        "squad=/shared/squad",
        "--arg",
        "{model}",
        "--gpus",
        "0",
    )
    assert made.status == 0, made.stderr
    [run] = Job.objects.exclude(pk=job.pk)
    assert run.request["arguments"] == ["models/sentiment"]
    assert run.source["models"][0]["reference"] == "nlp/sentiment@1"
    wrong = nightshift(
        "matrix",
        "--system",
        "v1=score.py",
        "--system-model",
        "v2=nlp/x",
        "--dataset-path",
        "squad=/shared/squad",
    )
    assert wrong.status != 0 and "--system-model names no system: v2" in wrong.stderr


def test_a_model_is_published_from_the_short_id_that_list_prints(
    nightshift, ada_in_a_lab, finished_job
):
    job = finished_job(ada_in_a_lab)
    short = job.public_id.hex[:8]
    assert short in nightshift("list").stdout
    published = nightshift(
        "model", "publish", short, "--name", "sentiment", "--file", "outputs/model.pt"
    )
    assert published.status == 0, published.stderr
    assert "Published nlp/sentiment@1" in published.stdout
