"""Structured logs: NIGHTSHIFT_LOG_FORMAT=json gives one JSON object per line, and every line
about a job carries the job's id and the id of the request that caused it, into Celery."""

import io
import json
import logging
import logging.config
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from jobs import specs, submission
from jobs.tasks import submit_job
from portal import logcontext
from tests.conftest import script_upload

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


@pytest.fixture
def json_lines():
    """The portal's own JSON handler, writing to a buffer; the lines it wrote, parsed."""
    config = django_settings.LOGGING
    formatter = logging.config.DictConfigurator(config).configure_custom(
        dict(config["formatters"]["json"])
    )
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(formatter)
    handler.addFilter(logcontext.ContextFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)


def test_a_job_action_logs_with_the_request_id_nginx_sent(api, student, fake_bridge, json_lines):
    job = submission.job_submit(user=student, spec=specs.JobSpec(name="j"), script=script_upload())
    submission.job_submit_to_pool(job.pk)
    response = api.post(
        reverse("api:job-cancel", args=[job.public_id]), HTTP_X_REQUEST_ID="req-7f3a9c"
    )
    assert response.status_code == 200
    assert response["X-Request-ID"] == "req-7f3a9c"
    lines = json_lines()
    about_the_job = [line for line in lines if line["job_id"] == str(job.public_id)]
    assert {"time", "level", "logger", "message", "request_id"} <= set(about_the_job[0])
    assert any("submitted" in line["message"] for line in about_the_job)
    cancel = [line for line in about_the_job if line["message"].startswith("cancel requested")]
    assert cancel and cancel[0]["request_id"] == "req-7f3a9c"
    assert cancel[0]["level"] == "INFO" and cancel[0]["logger"] == "nightshift.jobs"


def test_a_request_id_that_is_not_plain_text_is_replaced(client):
    response = client.get(reverse("login"), HTTP_X_REQUEST_ID='x"}\n{"level": "fake"')
    generated = response["X-Request-ID"]
    assert len(generated) == 32 and generated.isalnum()


def test_tasks_carry_the_request_id_and_learn_their_jobs_id(student, fake_bridge):
    job = submission.job_submit(user=student, spec=specs.JobSpec(name="j"), script=script_upload())
    headers: dict = {}
    token = logcontext.request_id.set("req-from-browser")
    try:
        logcontext.add_ids_to_task(headers=headers)
    finally:
        logcontext.request_id.reset(token)
    assert headers == {logcontext.REQUEST_ID_HEADER: "req-from-browser"}
    submit_job.push_request(id="task-1", **headers)
    try:
        logcontext.take_ids_from_task(task=submit_job, args=(job.pk,), kwargs={})
        assert logcontext.request_id.get() == "req-from-browser"
        assert logcontext.job_id.get() == str(job.public_id)
        logcontext.drop_ids_after_task(task=submit_job)
    finally:
        submit_job.pop_request()
    # Nothing is left behind for whatever the process does next.
    assert (logcontext.request_id.get(), logcontext.job_id.get()) == ("", "")
    submit_job.push_request(id="task-2")
    try:
        logcontext.take_ids_from_task(task=submit_job, args=(), kwargs={})
        assert (logcontext.request_id.get(), logcontext.job_id.get()) == ("task-2", "")
        logcontext.drop_ids_after_task(task=submit_job)
    finally:
        submit_job.pop_request()


def test_the_setting_makes_every_process_log_json(tmp_path):
    env = {**os.environ, "NIGHTSHIFT_LOG_FORMAT": "json", "NIGHTSHIFT_VAR_DIR": str(tmp_path)}
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "import logging; logging.getLogger('nightshift.probe').warning('disk %s full', 'sda')",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stderr.strip().splitlines()[-1])
    assert (line["level"], line["logger"], line["message"]) == (
        "WARNING",
        "nightshift.probe",
        "disk sda full",
    )
    assert line["job_id"] == "" and line["request_id"] == ""


def test_a_bad_log_format_is_refused_by_name(tmp_path):
    env = {**os.environ, "NIGHTSHIFT_LOG_FORMAT": "xml", "NIGHTSHIFT_VAR_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "NIGHTSHIFT_LOG_FORMAT" in done.stderr


def test_a_sweep_logs_one_line_per_kind_of_event_with_its_id(api, fake_bridge, json_lines):
    response = api.post(
        reverse("api:sweep-list"),
        {
            "name": "grid",
            "gpus": 0,
            "script": script_upload(),
            "parameters": '{"grid": {"lr": [0.1, 0.2, 0.3]}}',
        },
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    sweep_id = response.json()["id"]
    created = [line for line in json_lines() if line.get("sweep_id") == sweep_id]
    assert [line["message"] for line in created][:1] == [f"created: 3 runs of sweep {sweep_id}"]
