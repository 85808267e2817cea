"""nightshift template publish/list/show, nightshift run TEMPLATE --param k=v, and
nightshift model serve: each verb against the real API of a live server."""

import json

import pytest

from jobs.models import Job
from tests.conftest import OUTPUTS
from tests.factories import LabFactory, MembershipFactory
from tests.job_templates.conftest import FORM, TRAINER

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ada_leads_a_lab(logged_in):
    MembershipFactory(lab=LabFactory(name="NLP"), user=logged_in, role="lead")
    return logged_in


@pytest.fixture
def project(tmp_path):
    folder = tmp_path / "finetune"
    folder.mkdir()
    (folder / "train.py").write_text(TRAINER)
    (tmp_path / "form.json").write_text(json.dumps(FORM))
    (tmp_path / "card.md").write_text("# Fine-tune\n\nGive it reviews.\n")
    return folder


def publish(nightshift, *extra):
    return nightshift(
        "template",
        "publish",
        "finetune",
        "--lab",
        "NLP",
        "--name",
        "finetune",
        "--title",
        "Fine-tune a text classifier",
        "--entry",
        "python train.py",
        "--parameters",
        "form.json",
        "--card",
        "card.md",
        *extra,
    )


def test_a_lead_publishes_and_a_run_takes_its_parameters(
    nightshift, ada_leads_a_lab, project, fake_bridge
):
    published = publish(nightshift)
    assert published.status == 0, published.stderr
    said = "Published nlp/finetune@1: Fine-tune a text classifier, 4 parameters."
    assert said in published.stdout
    listed = nightshift("template", "list")
    assert "nlp/finetune@1" in listed.stdout and "epochs, learning_rate" in listed.stdout
    shown = nightshift("template", "show", "finetune")
    assert "--param epochs: integer 1..20, default 3" in shown.stdout
    assert "optimizer: choice (adam | sgd), default adam" in shown.stdout
    assert "Give it reviews." in shown.stdout
    ran = nightshift(
        "run",
        "nlp/finetune",
        "--param",
        "epochs=7",
        "--param",
        "optimizer=sgd",
        "--name",
        "from the cli",
    )
    assert ran.status == 0, ran.stderr
    job = Job.objects.get(name="from the cli")
    assert job.request["arguments"] == ["--epochs=7", "--lr=0.001"]
    assert job.parameters == {"epochs": 7, "learning_rate": 0.001, "optimizer": "sgd"}


def test_a_bad_value_is_refused_with_the_reason_and_nothing_runs(
    nightshift, ada_leads_a_lab, project, fake_bridge
):
    assert publish(nightshift).status == 0
    refused = nightshift("run", "finetune", "--param", "epochs=$(reboot)")
    assert refused.status != 0
    assert "Epochs: give a whole number, not '$(reboot)'" in refused.stderr
    malformed = nightshift("run", "finetune", "--param", "epochs")
    assert malformed.status != 0 and "write NAME=VALUE" in malformed.stderr
    unknown = nightshift("run", "nobody/finetune")
    assert unknown.status != 0 and "No template 'nobody/finetune'" in unknown.stderr
    assert not Job.objects.exists()


def test_a_model_is_served_with_the_template_that_made_it(
    nightshift, ada_leads_a_lab, project, fake_bridge
):
    from condor_bridge import JobState as Condor
    from jobs import sync

    assert publish(nightshift, "--serve", "python train.py --serve").status == 0
    assert nightshift("run", "finetune", "--name", "trainer").status == 0
    job = Job.objects.get(name="trainer")
    for path, body in OUTPUTS.items():
        (job.directory / path).parent.mkdir(parents=True, exist_ok=True)
        (job.directory / path).write_bytes(body)
    fake_bridge.set_state(str(job.public_id), Condor.RUNNING)
    fake_bridge.set_state(str(job.public_id), Condor.COMPLETED, exit_code=0)
    sync.jobs_sync()
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
    served = nightshift("model", "serve", "nlp/sentiment")
    assert served.status == 0, served.stderr
    assert "Serving nlp/sentiment@1 as job" in served.stdout
    server = Job.objects.get(name="Serve nlp/sentiment@1")
    assert server.request["live_services"] == ["serve"]
    assert server.request["arguments"] == ["--serve"]
