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
    assert f"{ran.name} asked for 2 GPUs, 4 CPUs, 8192 MB memory" in run.stdout
    assert "[bold]" not in run.stdout and "(s)" not in run.stdout
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


def test_the_jobs_name_is_bold_on_a_terminal_and_never_read_as_markup(nightshift, ran):
    ran.name = "[red]evil[/red]"
    ran.save(update_fields=["name"])
    piped = nightshift("usage", str(ran.public_id))
    assert "[red]evil[/red] asked for 2 GPUs" in piped.stdout
    terminal = nightshift("usage", str(ran.public_id), FORCE_COLOR="1", TERM="xterm")
    assert "\x1b[1m[red]evil[/red]\x1b[0m asked for 2 GPUs" in terminal.stdout
