"""On the personal pool: a student runs a lab's template, publishes what it made as a model,
and a labmate serves that model with one call; the template's serve command runs on a
workstation with the model at models/NAME/, and answers through the portal's live proxy and
HTCondor's tunnel, with a live token."""

import json

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from jobs.models import Job, JobState
from tests.conftest import client_with_token, script_upload
from tests.factories import LabFactory, MembershipFactory
from tests.helpers import wait_for
from tests.live_sessions.test_live_sessions_real_pool import answered, token_for
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(420)]

APP = """
import http.server, json, os, sys
import nightshift

if "--serve" not in sys.argv:
    os.makedirs("outputs", exist_ok=True)
    [flavour] = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--flavour=")]
    open("outputs/model.pt", "w").write(f"weights, {flavour}")
    sys.exit(0)

given = json.loads(os.environ["NIGHTSHIFT_PARAMETERS"])
weights = open(os.path.join(given["model_dir"], "model.pt")).read()

class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"model": given["model"], "weights": weights}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1", nightshift.serve_port()), Answer).serve_forever()
"""
FORM = [{"name": "flavour", "type": "choice", "choices": ["sweet", "sour"], "default": "sweet"}]


def test_a_model_made_by_a_template_is_served_by_a_labmate_in_one_call(
    live_proxy, live_server, settings, client
):
    settings.PORTAL_URL = live_server.url  # where the workstation fetches the model from
    users = get_user_model().objects
    lab = LabFactory(name="NLP")
    lead, sam, kim = (
        users.create_user(name, password="a-long-test-password") for name in ("lena", "sam", "kim")
    )
    for user, role in ((lead, "lead"), (sam, "member"), (kim, "member")):
        MembershipFactory(lab=lab, user=user, role=role)
    published = client_with_token(lead).post(
        reverse("api:template-list"),
        {
            "lab": "NLP",
            "name": "sweets",
            "title": "Sweets",
            "project": script_upload(APP, "app.py"),
            "entry_command": "python app.py",
            "serve_command": "python app.py --serve",
            "parameters": json.dumps(FORM),
            "resources": json.dumps({"gpus": 0, "memory_mb": 256}),
        },
        format="multipart",
    )
    assert published.status_code == 201, published.json()

    run_url = reverse("api:template-run", kwargs={"lab": "nlp", "name": "sweets"})
    ran = client_with_token(sam).post(run_url, {"parameters": {"flavour": "sour"}}, format="json")
    assert ran.status_code == 201, ran.json()
    trained = Job.objects.get(public_id=ran.json()["id"])
    wait_for_state(trained, {JobState.COMPLETED, JobState.FAILED, JobState.HELD}, timeout=180)
    assert trained.state == JobState.COMPLETED, list(trained.events.values_list("detail"))
    wait_for(
        lambda: Job.objects.get(pk=trained.pk).outputs_ready,
        timeout=60,
        what="the trained job's outputs",
    )
    model = client_with_token(sam).post(
        reverse("api:model-list"),
        {
            "job": str(trained.public_id),
            "name": "sweet-model",
            "files": ["outputs/model.pt"],
            "visibility": "lab",
        },
        format="json",
    )
    assert model.status_code == 201, model.json()

    served = client_with_token(kim).post(
        reverse("api:model-serve", kwargs={"lab": "nlp", "name": "sweet-model", "number": 1}),
        {},
        format="json",
    )
    assert served.status_code == 201, served.json()
    server = Job.objects.get(public_id=served.json()["id"])
    wait_for_state(server, {JobState.RUNNING, JobState.FAILED, JobState.HELD}, timeout=180)
    assert server.state == JobState.RUNNING, list(server.events.values_list("detail"))
    client.force_login(kim)
    bearer = {"Authorization": f"Bearer {token_for(client, server)}"}
    url = f"{live_proxy.url}/live/{server.public_id}/serve/predict"
    answer = answered(lambda: httpx.get(url, headers=bearer, timeout=60))
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"model": "nlp/sweet-model@1", "weights": "weights, sour"}
    assert httpx.get(url, timeout=30).status_code in (401, 403, 404)  # no token, no way in
    client.post(reverse("jobs:cancel", args=[server.public_id]))
    wait_for_state(server, {JobState.REMOVED})
