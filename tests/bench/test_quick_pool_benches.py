"""The benchmarks that need the personal pool, run in a quick mode as `make bench-*` runs
them: each starts from a clean checkout, submits to the real pool and prints its headline
figure, so that the figures docs/benchmarks.md records for them cannot rot unseen."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline import database_url

pytestmark = [pytest.mark.condor, pytest.mark.timeout(900)]

BENCH = Path(__file__).resolve().parents[2] / "bench"
# A Redis database no other lane uses: the sweep bench empties its own before it starts.
REDIS_URL = "redis://127.0.0.1:6379/8"

# script, arguments, the environment it adds, lines its output must hold (its headlines)
QUICK = [
    (
        # More runs than a request writes (250): the worker writes them, as at 10,000.
        "sweep_scale.py",
        ["--runs", "500"],
        {},
        [
            r"^sweep 0k / raw: \d+\.\d\d x \(target: within 2 x\)$",
            r"^\s+runs written, as the sweep's page showed them\s+[\d,]+ at",
            # More runs than a request writes: their folders are filled after the submit.
            r"^\s*500-run sweep: API POST -> every run's folder made\s+\d+\.\d\d s$",
            # ... and its cluster is materialized late: the schedd makes the jobs after.
            r"^\s*500-run sweep: API POST -> its first 500 jobs made\s+\d+\.\d\d s$",
            r"^\s*sweep / raw materialized late\s+\d+\.\d\d x$",
        ],
    ),
    (
        "bindings_gil.py",
        ["--jobs", "500"],
        {},
        [r"^thread beside a query: \d+ %, beside a submit: \d+ %$"],
    ),
    (
        "submit_and_sync.py",
        ["--singles", "2", "--batch", "50"],
        {},
        [
            r"^\s+API POST -> ClusterId, 1 job \(median of 2\)\s+\d+ ms$",
            r"^\s+batch ratio portal / raw one cluster\s+\d+\.\d x$",
            r"^\s+sweep ratio portal / raw one cluster with folders\s+\d+\.\d x$",
        ],
    ),
    (
        "sync_scale.py",
        ["--jobs", "300"],
        {},
        [
            r"^\s+sync, 300 active, all changed\s",
            r"^\s+raw htcondor2 Schedd.query of the same 297 jobs",
        ],
    ),
    (
        # It turns the pool's second schedd on, and off again at the end.
        "sync_schedds.py",
        ["--jobs", "300"],
        {},
        [r"^sync 2 schedds, nothing changed / raw parallel query: \d+\.\d\d x$"],
    ),
    (
        "sessions.py",
        [],
        {"NIGHTSHIFT_BENCH_REQUESTS": "20"},
        [r"^proxy overhead p95: -?\d+\.\d\d ms$"],
    ),
    (
        "goodput.py",
        ["--quick"],
        {},
        [r"^with checkpoints\s+\d+\.\d%", r"^without\s+\d+\.\d%"],
    ),
    (
        "environments.py",
        ["--quick"],
        {},
        [r"^warm start overhead: -?\d+\.\d\d s; downloaded: \d+ bytes$"],
    ),
]


@pytest.mark.parametrize(
    "script, arguments, environment, headlines", QUICK, ids=[q[0] for q in QUICK]
)
def test_the_quick_pool_bench_runs_and_prints_its_figures(
    script, arguments, environment, headlines, bench_environment
):
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *arguments],
        capture_output=True,
        text=True,
        timeout=800,
        env=os.environ
        | {"DATABASE_URL": database_url(f"poolbench{os.getpid()}"), "REDIS_URL": REDIS_URL}
        | bench_environment
        | environment,
        cwd=BENCH.parent,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for headline in headlines:
        assert re.search(headline, done.stdout, re.MULTILINE), done.stdout[-3000:]
