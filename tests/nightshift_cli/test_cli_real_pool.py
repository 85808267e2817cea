"""The real `nightshift` console script, a live web server, a Celery worker and the real pool."""

import pytest

from jobs.models import Job

pytestmark = [pytest.mark.condor, pytest.mark.timeout(400)]

TRAIN = """
import os, sys, time
print("epoch 1 loss 0.9", flush=True)
os.makedirs("outputs/checkpoints", exist_ok=True)
with open("outputs/model.txt", "w") as f:
    f.write("weights " + " ".join(sys.argv[1:]) + " " + os.environ["LR"])
with open("outputs/checkpoints/last.pt", "wb") as f:
    f.write(os.urandom(2 * 1024 * 1024))
print("epoch 2 loss 0.4", flush=True)
"""

FAILS = """
import sys
print("starting", flush=True)
print("bad data", file=sys.stderr)
sys.exit(7)
"""


def test_submit_wait_then_logs_then_download(nightshift, logged_in, live_pipeline, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    submitted = nightshift(
        "submit",
        "train.py",
        "--gpus",
        "0",
        "--memory",
        "0.25",
        "--arg",
        "--epochs=2",
        "--env",
        "LR=0.1",
        "--wait",
        timeout=300,
    )
    assert submitted.status == 0, submitted.stderr
    assert "Completed" in submitted.stderr
    job = Job.objects.get()
    short_id = str(job.public_id)[:8]

    logs = nightshift("logs", short_id)
    assert logs.status == 0, logs.stderr
    assert logs.stdout == "epoch 1 loss 0.9\nepoch 2 loss 0.4\n"

    downloaded = nightshift("download", short_id, "--to", "results")
    assert downloaded.status == 0, downloaded.stderr
    assert (tmp_path / "results/outputs/model.txt").read_text() == "weights --epochs=2 0.1"
    assert (tmp_path / "results/outputs/checkpoints/last.pt").stat().st_size == 2 * 1024 * 1024
    assert "Saved 2 files" in downloaded.stdout


def test_follow_streams_the_log_and_exits_with_the_jobs_code(
    nightshift, logged_in, live_pipeline, tmp_path
):
    (tmp_path / "fails.py").write_text(FAILS)
    done = nightshift(
        "submit", "fails.py", "--gpus", "0", "--memory", "0.25", "--follow", timeout=300
    )
    assert done.status == 7, done.stderr
    assert done.stdout == "starting\n"
    assert "Failed: the script exited with code 7." in done.stderr
    errors = nightshift("logs", str(Job.objects.get().public_id), "--stream", "stderr")
    assert errors.stdout == "bad data\n"
