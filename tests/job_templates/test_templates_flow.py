"""In Chromium, on the real pool: a lab lead publishes a job template; a student runs it by
filling in three fields; the result is published as a model; a labmate runs a new job with
that model as its input, which reads its file on a workstation; a member of another lab
sees none of it."""

import json

import pytest
from django.contrib.auth import get_user_model

from tests.factories import LabFactory, MembershipFactory
from tests.kits.browser import sign_in
from tests.model_registry.test_models_flow import run_script, switch_to

pytestmark = [pytest.mark.condor, pytest.mark.browser, pytest.mark.timeout(480)]

TRAINER = """
import argparse, os, nightshift
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int)
parser.add_argument("--lr", type=float)
given = parser.parse_args()
for epoch in range(given.epochs):
    nightshift.log(step=epoch, loss=1.0 / (epoch + 1))
os.makedirs("outputs", exist_ok=True)
with open("outputs/model.txt", "w") as weights:
    weights.write(f"epochs={given.epochs} lr={given.lr} optimizer={os.environ['OPTIMIZER']}")
"""
FORM = [
    {"name": "epochs", "type": "integer", "default": 3, "min": 1, "max": 10},
    {
        "name": "learning_rate",
        "type": "number",
        "default": 0.001,
        "min": 1e-6,
        "max": 1,
        "argument": "--lr",
    },
    {
        "name": "optimizer",
        "type": "choice",
        "choices": ["adam", "sgd"],
        "default": "adam",
        "environment": "OPTIMIZER",
    },
]
EVALUATE = """
import os, nightshift
print("read:", open(os.path.join(nightshift.model_path("classifier"), "model.txt")).read())
"""


def test_a_lead_publishes_a_template_a_student_runs_it_and_a_labmate_uses_its_model(
    page, live_server, live_pipeline, screenshot, tmp_path, settings
):
    settings.PORTAL_URL = live_server.url  # where the workstation fetches the model from
    users = get_user_model().objects
    lab, other = LabFactory(name="NLP"), LabFactory(name="Vision")
    for name, its_lab, role in (
        ("lena", lab, "lead"),
        ("sam", lab, "member"),
        ("kim", lab, "member"),
        ("olga", other, "member"),
    ):
        user = users.create_user(name, password="a-long-test-password")
        MembershipFactory(lab=its_lab, user=user, role=role)
    (tmp_path / "train.py").write_text(TRAINER)

    sign_in(page, live_server.url, "lena")
    page.get_by_role("link", name="Templates").click()
    page.get_by_role("link", name="Publish a template").click()
    page.get_by_label("Name", exact=True).fill("classifier")
    page.get_by_label("Title").fill("Fine-tune a text classifier")
    page.get_by_label("Project").set_input_files(str(tmp_path / "train.py"))
    page.get_by_label("Entry command").fill("python train.py")
    page.get_by_label("GPUs").fill("0")
    page.get_by_label("Parameters").fill(json.dumps(FORM))
    page.get_by_label("Card").fill("# Classifier\n\nPick **epochs**, a rate and an optimizer.")
    page.get_by_role("button", name="Publish").click()
    page.locator("[data-role=reference]", has_text="nlp/classifier@1").wait_for()
    screenshot("template-published")

    switch_to(page, live_server.url, "sam")
    page.get_by_role("link", name="Templates").click()
    page.get_by_role("link", name="Fine-tune a text classifier").click()
    page.get_by_label("Epochs").fill("2")
    page.get_by_label("Learning rate").fill("0.05")
    page.get_by_label("Optimizer").select_option("sgd")
    screenshot("template-run-form")
    page.get_by_role("button", name="Start the job").click()
    page.get_by_role("heading", name="Fine-tune a text classifier").wait_for()
    page.locator("[data-role=state]", has_text="Completed").wait_for(timeout=180_000)
    page.get_by_role("link", name="outputs/model.txt").wait_for(timeout=60_000)
    page.get_by_role("link", name="Publish as a model").click()
    page.get_by_label("Name").fill("classifier")
    page.get_by_role("button", name="Publish").click()
    page.locator("[data-role=reference]", has_text="nlp/classifier@1").wait_for()

    switch_to(page, live_server.url, "kim")
    page.get_by_role("link", name="Models").click()
    page.get_by_role("link", name="classifier").click()
    page.get_by_role("link", name="Start a job with this model").click()
    run_script(page, tmp_path, EVALUATE, "evaluate-classifier")
    read = "read: epochs=2 lr=0.05 optimizer=sgd"
    page.locator("[data-role=stdout]", has_text=read).wait_for(timeout=30_000)
    screenshot("template-model-used")

    switch_to(page, live_server.url, "olga")
    page.get_by_role("link", name="Templates").click()
    page.get_by_text("No templates yet.").wait_for()
    page.get_by_role("link", name="Models").click()
    page.get_by_text("No models yet.").wait_for()
    from job_templates.models import TemplateVersion

    version = TemplateVersion.objects.get()
    assert page.goto(f"{live_server.url}/templates/versions/{version.pk}/").status == 404
