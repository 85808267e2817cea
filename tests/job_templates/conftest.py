"""A lab whose lead publishes templates, its students who run them, and another lab's
member, on the fake bridge."""

import json

import pytest
from django.urls import reverse

from tests.conftest import OUTPUTS, client_with_token, script_upload
from tests.model_registry.conftest import people  # noqa: F401 - the shared cast

TEMPLATES = reverse("api:template-list")

TRAINER = """
import json, os, sys
os.makedirs("outputs", exist_ok=True)
print("argv", json.dumps(sys.argv[1:]))
print("optimizer", os.environ.get("OPTIMIZER"))
print("parameters", os.environ["NIGHTSHIFT_PARAMETERS"])
open("outputs/model.pt", "wb").write(b"weights")
"""

FORM = [
    {
        "name": "epochs",
        "type": "integer",
        "label": "Epochs",
        "default": 3,
        "min": 1,
        "max": 20,
        "help": "Passes over the data.",
    },
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
    {"name": "note", "type": "text", "max_length": 60, "required": False},
]


def publish(user, lab, *, name="finetune", script=TRAINER, parameters=FORM, **fields):
    body = {
        "lab": lab.name,
        "name": name,
        "title": "Fine-tune a text classifier",
        "project": script_upload(script),
        "entry_command": "python train.py --base bert",
        "parameters": parameters if isinstance(parameters, str) else json.dumps(parameters),
        "resources": json.dumps({"gpus": 0}),
        **fields,
    }
    return client_with_token(user).post(TEMPLATES, body, format="multipart")


def published(user, lab, **fields) -> dict:
    response = publish(user, lab, **fields)
    assert response.status_code == 201, response.json()
    return response.json()


def run(user, reference="vision_robotics/finetune", **body):
    lab, name = reference.split("@")[0].split("/")
    number = reference.partition("@")[2]
    kwargs = {"lab": lab, "name": name}
    if number:
        url = reverse("api:template-version-run", kwargs={**kwargs, "number": int(number)})
    else:
        url = reverse("api:template-run", kwargs=kwargs)
    return client_with_token(user).post(url, body, format="json")


@pytest.fixture
def finish(fake_bridge):
    """finish(job): the job ran and completed, leaving the usual outputs and metrics."""

    def make(job, files=None):
        from condor_bridge import JobState as Condor
        from jobs import sync

        for path, body in (OUTPUTS if files is None else files).items():
            (job.directory / path).parent.mkdir(parents=True, exist_ok=True)
            (job.directory / path).write_bytes(body)
        fake_bridge.set_state(str(job.public_id), Condor.RUNNING)
        fake_bridge.set_state(str(job.public_id), Condor.COMPLETED, exit_code=0)
        sync.jobs_sync()
        job.refresh_from_db()
        assert job.outputs_ready, job.state
        return job

    return make
