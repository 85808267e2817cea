"""In Chromium, on the real pool: a student's finished job is published as a model from its
page; a labmate finds it in the lab's catalogue, starts a job with it from its page, and
that job reads the model's file on a workstation; a member of another lab sees none of it."""

import pytest
from django.contrib.auth import get_user_model

from tests.factories import LabFactory, MembershipFactory
from tests.kits.browser import sign_in

pytestmark = [pytest.mark.condor, pytest.mark.browser, pytest.mark.timeout(420)]

TRAINING = """
import nightshift
for epoch in range(3):
    nightshift.log(step=epoch, loss=1.0 / (epoch + 1))
open("outputs/model.txt", "w").write("trained weights")
"""
EVALUATE = """
import os, nightshift
print("read:", open(os.path.join(nightshift.model_path("sentiment"), "model.txt")).read())
"""


def run_script(page, tmp_path, script: str, name: str) -> None:
    """Fill the form already open, submit, and wait for the job to complete."""
    path = tmp_path / f"{name}.py"
    path.write_text(script)
    page.get_by_label("Job name").fill(name)
    page.get_by_label("Training script or project").set_input_files(str(path))
    page.get_by_label("GPUs").fill("0")
    page.get_by_role("button", name="Submit job").click()
    page.get_by_role("heading", name=name).wait_for()
    page.locator("[data-role=state]", has_text="Completed").wait_for(timeout=180_000)


def switch_to(page, url: str, who: str) -> None:
    page.get_by_role("button", name="Log out").click()
    sign_in(page, url, who)


def test_a_model_is_published_used_by_a_labmate_and_hidden_from_another_lab(
    page, live_server, live_pipeline, screenshot, tmp_path, settings
):
    settings.PORTAL_URL = live_server.url  # where the workstation fetches the model from
    users = get_user_model().objects
    lab, other = LabFactory(name="NLP"), LabFactory(name="Vision")
    for name, its_lab in (("sam", lab), ("kim", lab), ("olga", other)):
        user = users.create_user(name, password="a-long-test-password")
        MembershipFactory(lab=its_lab, user=user)
    sign_in(page, live_server.url, "sam")
    page.get_by_role("link", name="New job").click()
    run_script(page, tmp_path, TRAINING, "train-sentiment")
    page.get_by_role("link", name="outputs/model.txt").wait_for(timeout=60_000)
    page.get_by_role("link", name="Publish as a model").click()
    page.get_by_label("Name").fill("sentiment")
    page.get_by_label("Card").fill("# Sentiment\n\nA **tiny** classifier.")
    page.get_by_role("button", name="Publish").click()
    page.locator("[data-role=reference]", has_text="nlp/sentiment@1").wait_for()
    assert "tiny" in page.locator("[data-role=card] strong").inner_text()
    assert page.locator("tr[data-metric=loss]").inner_text().split()[1:2] == ["0.3333"]
    screenshot("model-version")

    switch_to(page, live_server.url, "kim")
    page.get_by_role("link", name="Models").click()
    page.get_by_role("link", name="NLP").click()
    page.get_by_role("link", name="sentiment").click()
    page.get_by_role("link", name="Start a job with this model").click()
    assert page.get_by_label("nlp/sentiment@1").is_checked()
    run_script(page, tmp_path, EVALUATE, "evaluate-sentiment")
    page.locator("[data-role=stdout]", has_text="read: trained weights").wait_for(timeout=30_000)
    assert "nlp/sentiment@1" in page.locator("[data-role=models]").inner_text()

    switch_to(page, live_server.url, "olga")
    page.get_by_role("link", name="Models").click()
    page.get_by_text("No models yet.").wait_for()
    from model_registry.models import ModelVersion

    version = ModelVersion.objects.get()
    response = page.goto(f"{live_server.url}/models/versions/{version.pk}/")
    assert response.status == 404
