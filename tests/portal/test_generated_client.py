"""A client generated from the API's own schema works as it comes: openapi-python-client
writes a package from /api/v1/schema/, which imports, submits a script as multipart,
follows the job to its end on the real pool and lists its outputs, with no hand edits."""

from __future__ import annotations

import importlib
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from accounts import services as account_services

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]

GENERATOR = str(Path(sys.executable).with_name("openapi-python-client"))
PACKAGE = "nightshift_generated_client"
TRAINING = b"""
import json
print("training", flush=True)
json.dump({"accuracy": 0.9}, open("outputs/model.json", "w"))
"""


@pytest.fixture
def generated_client(live_server, tmp_path, monkeypatch):
    schema = httpx.get(f"{live_server.url}/api/v1/schema/", params={"format": "json"}, timeout=60)
    assert schema.status_code == 200
    (tmp_path / "schema.json").write_bytes(schema.content)
    # The generator formats its output with ruff, which lies beside it in the venv.
    monkeypatch.setenv("PATH", f"{Path(GENERATOR).parent}:{os.environ['PATH']}")
    done = subprocess.run(
        [
            GENERATOR,
            "generate",
            "--path",
            "schema.json",
            "--meta",
            "none",
            "--output-path",
            PACKAGE,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module(PACKAGE)
    for name in [module for module in sys.modules if module.startswith(PACKAGE)]:
        del sys.modules[name]


def test_a_generated_client_submits_follows_and_lists_the_outputs_of_a_job(
    generated_client, live_server, live_pipeline, student
):
    models = importlib.import_module(f"{PACKAGE}.models")
    types = importlib.import_module(f"{PACKAGE}.types")
    create = importlib.import_module(f"{PACKAGE}.api.jobs.jobs_create")
    retrieve = importlib.import_module(f"{PACKAGE}.api.jobs.jobs_retrieve")
    outputs = importlib.import_module(f"{PACKAGE}.api.jobs.jobs_outputs_list")
    token = account_services.token_create(user=student, name="generated").secret
    client = generated_client.AuthenticatedClient(base_url=live_server.url, token=token)

    job = create.sync(
        client=client,
        body=models.JobSubmitRequest(
            script=types.File(payload=io.BytesIO(TRAINING), file_name="train.py"),
            gpus=0,
            memory_gb=0.25,
        ),
    )
    assert isinstance(job, models.Job), job
    assert job.name == "train.py"

    deadline = time.monotonic() + 180
    while job.state.value not in ("completed", "failed", "held", "removed"):
        assert time.monotonic() < deadline, f"the job stayed {job.state.value}"
        time.sleep(1)
        job = retrieve.sync(job.id, client=client)
    assert job.state.value == "completed", job.status_detail

    files = outputs.sync(job.id, client=client)
    assert [file.path for file in files] == ["outputs/model.json"]
