"""The helper's checkpoints, in a real Python process: SIGTERM asks to save, the checkpoint
code tells HTCondor to start the job again, and the next run resumes from what was saved."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HELPER_DIR = Path("jobs/runtime").resolve()
CHECKPOINT_EXIT_CODE = 85

COUNTER = """
import json, os, time
import nightshift

folder = nightshift.checkpoint_dir()
state = os.path.join(folder, "state.json")
count = json.load(open(state))["count"] if os.path.exists(state) else 0
print("resumed at", count, flush=True)
while count < int(os.environ.get("UNTIL", "1000000")):
    count += 1
    nightshift.log(step=count, value=count)
    time.sleep(0.01)
    if nightshift.should_checkpoint():
        def save(target):
            if os.environ.get("FAIL_SAVE"):
                raise RuntimeError("disk full")
            json.dump({"count": count}, open(os.path.join(target, "state.json"), "w"))
        nightshift.checkpoint_and_exit(save)
print("done at", count, flush=True)
"""


def start(tmp_path, **env):
    script = tmp_path / "train.py"
    script.write_text(COUNTER)
    environment = os.environ | {
        "PYTHONPATH": str(HELPER_DIR),
        "NIGHTSHIFT_CHECKPOINT_DIR": str(tmp_path / "checkpoint"),
        "NIGHTSHIFT_METRICS_FILE": str(tmp_path / "metrics.jsonl"),
        "NIGHTSHIFT_CHECKPOINT_EXIT_CODE": str(CHECKPOINT_EXIT_CODE),
        **env,
    }
    return subprocess.Popen(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        text=True,
    )


def saved_count(tmp_path) -> int:
    return json.loads((tmp_path / "checkpoint" / "state.json").read_text())["count"]


def test_sigterm_saves_a_checkpoint_and_exits_with_the_checkpoint_code(tmp_path):
    job = start(tmp_path)
    assert job.stdout.readline().startswith("resumed at 0")
    time.sleep(0.3)
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=20) == CHECKPOINT_EXIT_CODE
    assert saved_count(tmp_path) > 0


def test_the_next_run_resumes_from_the_checkpoint_and_finishes(tmp_path):
    job = start(tmp_path)
    job.stdout.readline()
    time.sleep(0.3)
    job.send_signal(signal.SIGTERM)
    job.wait(timeout=20)
    count = saved_count(tmp_path)
    again = start(tmp_path, UNTIL=str(count + 20))
    output = again.communicate(timeout=30)[0]
    assert again.returncode == 0
    assert f"resumed at {count}" in output and f"done at {count + 20}" in output


def test_an_interval_checkpoints_without_being_asked(tmp_path):
    job = start(tmp_path, NIGHTSHIFT_CHECKPOINT_INTERVAL_S="0.2")
    assert job.wait(timeout=20) == CHECKPOINT_EXIT_CODE
    assert saved_count(tmp_path) > 0


def test_a_save_that_fails_keeps_the_previous_checkpoint_whole(tmp_path):
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "state.json").write_text('{"count": 7}')
    job = start(tmp_path, NIGHTSHIFT_CHECKPOINT_INTERVAL_S="0.1", FAIL_SAVE="1")
    job.communicate(timeout=20)
    assert job.returncode not in (0, CHECKPOINT_EXIT_CODE)
    assert saved_count(tmp_path) == 7
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".checkpoint-")] == []


def test_a_script_that_ignores_the_helper_dies_on_sigterm_as_usual(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import time\nprint('up', flush=True)\ntime.sleep(60)\n")
    job = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONPATH": str(HELPER_DIR)},
    )
    job.stdout.readline()
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=20) == -signal.SIGTERM


def test_the_documented_loop_example_resumes_where_it_was_stopped(tmp_path):
    example = Path("docs/examples/checkpoint_loop.py").resolve()
    environment = os.environ | {
        "PYTHONPATH": str(HELPER_DIR),
        "STEPS": "40",
        "NIGHTSHIFT_CHECKPOINT_DIR": str(tmp_path / "checkpoint"),
        "NIGHTSHIFT_METRICS_FILE": str(tmp_path / "metrics.jsonl"),
    }
    job = subprocess.Popen(
        [sys.executable, str(example)],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert job.stdout.readline().strip() == "starting at step 0"
    time.sleep(0.8)
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=20) == CHECKPOINT_EXIT_CODE
    again = subprocess.run(
        [sys.executable, str(example)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0
    resumed_at = int(again.stdout.splitlines()[0].split()[-1])
    assert 0 < resumed_at < 40
    result = json.loads((tmp_path / "outputs" / "result.json").read_text())
    assert result == {"steps": 40, "total": sum(range(1, 41))}


def test_the_documented_pytorch_example_is_valid_python():
    compile(
        Path("docs/examples/checkpoint_pytorch.py").read_text(), "checkpoint_pytorch.py", "exec"
    )
