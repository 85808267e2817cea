"""make gpu-check says why it does nothing where there is no GPU, and reports each step it
could not take with the reason, never as passed."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "gpu-check" / "gpu_check.py"
ONE_GPU = """#!/bin/sh
echo "0, GPU-0f1e2d3c-aaaa-bbbb-cccc-000000000001, NVIDIA H200, 143771, 9.0"
"""


def run(tmp_path, *args, path):
    env = {k: v for k, v in os.environ.items() if k != "NIGHTSHIFT_GPU_CHECK_PYTHON"}
    env |= {"PATH": path, "NIGHTSHIFT_GPU_CHECK_PYTHON": str(tmp_path / "no-python")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )


def test_without_a_gpu_it_skips_with_a_message(tmp_path):
    done = run(tmp_path, path="/usr/bin:/bin")
    assert done.returncode == 0
    assert "gpu-check: skipped: no NVIDIA GPU here" in done.stdout


def test_without_pytorch_the_steps_that_need_it_are_skipped_not_passed(tmp_path):
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(ONE_GPU)
    smi.chmod(0o755)
    done = run(tmp_path, "--no-pool", path=f"{smi.parent}:/nonexistent")
    assert done.returncode == 0, done.stderr
    assert "GPU 0: NVIDIA H200, 143771 MB, capability 9.0" in done.stdout
    assert "passed   nvidia-smi lists the GPUs" in done.stdout
    assert "skipped  owner probe sees a CUDA process that is not a job" in done.stdout
    assert "no Python here imports torch with CUDA" in done.stdout
    report = (REPO / "var" / "gpu-check" / "report.md").read_text()
    assert "- **skipped**: the job helper samples that process's GPU" in report
