"""The `nightshift` helper jobs import: one JSON line per nightshift.log() call."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

from jobs.selectors import job_metrics

HELPER = "jobs/runtime/nightshift.py"


@pytest.fixture
def nightshift(tmp_path, monkeypatch):
    monkeypatch.setenv("NIGHTSHIFT_METRICS_FILE", str(tmp_path / ".nightshift" / "metrics.jsonl"))
    spec = importlib.util.spec_from_file_location("nightshift_under_test", HELPER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_metrics(nightshift):
    path = Path(nightshift.metrics_path())
    return job_metrics(path.parent, path)


def test_log_appends_one_json_row_per_step(nightshift):
    nightshift.log(step=3, loss=0.42, accuracy=0.8)
    lines = Path(nightshift.metrics_path()).read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert rows[0]["step"] == 3 and rows[0]["loss"] == 0.42 and rows[0]["accuracy"] == 0.8


def test_steps_count_up_when_not_given(nightshift):
    nightshift.log(loss=1.0)
    nightshift.log(loss=0.5)
    assert [row["step"] for row in read_metrics(nightshift).rows] == [0, 1]


def test_nan_and_infinity_are_written_as_missing_values(nightshift):
    nightshift.log(step=0, loss=math.nan, grad=math.inf)
    row = read_metrics(nightshift).rows[0]
    assert row["loss"] is None and row["grad"] is None


def test_non_numbers_are_refused_with_the_metrics_name(nightshift):
    with pytest.raises(TypeError, match="metric 'label' must be a number"):
        nightshift.log(step=0, label="cat")


def test_the_reader_skips_broken_lines_and_keeps_name_order(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"step": 0, "loss": 1.0}\nnot json\n[1, 2]\n{"loss": 2}\n'
        '{"step": 1, "loss": 0.5, "acc": 0.7, "note": "x"}\n'
    )
    metrics = job_metrics(tmp_path, path)
    assert metrics.names == ["loss", "acc"]
    assert [row["step"] for row in metrics.rows] == [0, 1]
    assert metrics.skipped_lines == 3
    assert "note" not in metrics.rows[1]


def test_steps_logged_again_after_a_resume_show_once_with_the_later_values(nightshift):
    for step in range(6):
        nightshift.log(step=step, loss=10 - step)
    # Evicted after step 5; the checkpoint was at step 3, so steps 4 and 5 run again.
    for step in range(4, 8):
        nightshift.log(step=step, loss=5 - step / 10)
    rows = read_metrics(nightshift).rows
    assert [row["step"] for row in rows] == list(range(8))
    assert rows[4]["loss"] == pytest.approx(4.6) and rows[3]["loss"] == 7


def test_two_calls_for_one_step_make_one_row(nightshift):
    nightshift.log(step=1, loss=0.5)
    nightshift.log(step=1, accuracy=0.9)
    (row,) = read_metrics(nightshift).rows
    assert (row["loss"], row["accuracy"]) == (0.5, 0.9)


def test_should_stop_once_the_portal_asks_the_run_to_end_early(nightshift, tmp_path, monkeypatch):
    monkeypatch.setenv("NIGHTSHIFT_HELPER_DIR", str(tmp_path / ".nightshift"))
    (tmp_path / ".nightshift" / "control").mkdir(parents=True, exist_ok=True)
    assert not nightshift.should_stop()
    (tmp_path / ".nightshift" / "control" / "stop").write_text("pruned\n")  # a study's pruning
    assert nightshift.should_stop()
