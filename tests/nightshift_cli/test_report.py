"""`nightshift report`: a lab lead reads and saves their labs' usage from the command line."""

import csv

import pytest

from accounts import services as account_services
from tests.campus import PERIOD


@pytest.fixture
def as_lead(nightshift, live_server, cli_env, campus):
    secret = account_services.token_create(user=campus["lena"], name="cli").secret
    cli_env |= {"NIGHTSHIFT_URL": live_server.url, "NIGHTSHIFT_TOKEN": secret}
    return nightshift


def test_a_lead_prints_the_usage_table_of_their_lab(as_lead):
    run = as_lead("report", "--from", PERIOD["start"], "--to", PERIOD["end"])
    assert run.status == 0, run.stderr
    assert "Vision · 2026-11-02 to 2026-11-03" in run.stdout
    assert "9.0 GPU-hours" in run.stdout and "1.0 GPU-hours lost to evictions" in run.stdout
    assert "ada" in run.stdout and "bob" not in run.stdout


def test_every_run_of_a_lab_named_by_name_is_saved_as_csv(as_lead, tmp_path):
    target = tmp_path / "runs.csv"
    run = as_lead(
        "report",
        "--lab",
        "vision",
        "--from",
        PERIOD["start"],
        "--to",
        PERIOD["end"],
        "--table",
        "records",
        "--csv",
        str(target),
    )
    assert run.status == 0, run.stderr
    rows = list(csv.reader(target.open()))
    assert rows[0][0] == "Job" and len(rows) == 4


def test_another_labs_report_is_the_servers_message(as_lead):
    run = as_lead("report", "--lab", "NLP")
    assert run.status != 0
    assert "No such lab" in run.stderr and "Traceback" not in run.stderr
