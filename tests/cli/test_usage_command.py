"""`nightshift usage ID`: what a job used and the advice it earns, from the command line."""

import json

import pytest

from tests.usage.helpers import finished_job


@pytest.fixture
def ran(logged_in, fake_bridge):
    return finished_job(logged_in, fake_bridge)


def test_a_finished_jobs_usage_is_printed_with_its_advice(nightshift, ran):
    run = nightshift("usage", str(ran.public_id)[:8])
    assert run.status == 0, run.stderr
    assert "asked for 2 GPU(s), 4 CPU(s), 8192 MB memory" in run.stdout
    assert "Memory peak      1536.00 MB" in run.stdout
    assert "GPUs used        1 of 2" in run.stdout
    assert "• You asked for 2 GPUs and used 1, at 70 % on average." in run.stdout
    assert f"/jobs/new/?from={ran.public_id}&gpus=1" in run.stdout


def test_every_sample_is_listed_run_by_run(nightshift, ran):
    run = nightshift("usage", str(ran.public_id), "--samples")
    assert run.status == 0, run.stderr
    assert "on ws-volta" in run.stdout
    assert run.stdout.count("1536.00") >= 3


def test_json_is_the_apis_answer(nightshift, ran):
    run = nightshift("usage", str(ran.public_id), "--json")
    body = json.loads(run.stdout)
    assert body["summary"]["gpus_used"] == 1 and body["is_final"] is True


def test_a_job_that_is_not_yours_is_the_servers_message(nightshift, logged_in, fake_bridge):
    run = nightshift("usage", "6f1c3a52-8d7e-4c2b-9a51-0e4b2f1d3c77")
    assert run.status != 0 and "Traceback" not in run.stderr
