"""Each benchmark that needs no pool, run in its quick mode (small sizes, seconds) as
`make bench-*` runs it: it still starts from a clean checkout and prints its figures, so
that the numbers in docs/benchmarks.md cannot rot unseen. (bench-checkpoints has its own
test in tests/forecasts.) Those that need the personal pool are in test_quick_pool_benches."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline import database_url

BENCH = Path(__file__).resolve().parents[2] / "bench"
REDIS_URL = "redis://127.0.0.1:6379/14"  # the benchmarks' own, as make bench-* gives them

# script, arguments (and settings), a line its output must hold (its headline figure)
QUICK = [
    (
        "placement.py",
        ["--quick"],
        r"^interruptions vs default: [-+]\d+ %; start inside range: \d+ %$",
    ),
    (
        "sync_apply.py",
        ["--jobs", "300", "--repeat", "1"],
        r"^apply 0k changes, 2 threads / 1 thread: \d+\.\d\d x$",
    ),
    (
        "usage_sampling.py",
        ["--quick"],
        r"^\s+summarising 50 ended jobs \(batches of \d+\)\s+\d+\.\d\d s\s+\d+$",
    ),
    ("api_list.py", ["--quick"], r"^\| `nightshift list` end to end .* \| \d+\.\d \|$"),
    ("job_list_scale.py", ["--quick"], r"^\| GET /api/v1/jobs/\?state=held \| [\d.]+ \| [\d.]+ \|"),
    ("reports.py", ["--quick"], r"^quota check: one heavy user's 7-day GPU-hours\s+\d+\.\d ms$"),
    (
        "status_polls.py",
        ["--quick"],
        r"^poll unchanged: [\d.]+ ms CPU .*; p95 with 40 students watching: \d+ ms$",
    ),
    (
        "datasets.py",
        ["NIGHTSHIFT_BENCH_DATASET_GB=0.01", "NIGHTSHIFT_BENCH_DATASET_JOBS=4"],
        r"^warm start overhead: -?\d+\.\d\d s; bytes moved for 4 jobs: \d+$",
    ),
    # Four students at once (Locust against gunicorn): requests answered, none failed.
    ("web_load.py", ["--quick"], r"^\| 4 \| [\d.]+ \| \d+ \| \d+ \| 0 of [1-9][\d,]* \|"),
]


@pytest.mark.parametrize("script, arguments, headline", QUICK, ids=[q[0] for q in QUICK])
def test_the_quick_bench_runs_and_prints_its_figures(
    script, arguments, headline, bench_environment
):
    given = dict(argument.split("=", 1) for argument in arguments if "=" in argument)
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *(a for a in arguments if "=" not in a)],
        capture_output=True,
        text=True,
        timeout=600,
        env=os.environ
        # A database name of the bench's own: each bench makes and drops `test_<name>`,
        # which must not be the test run's own test database.
        | {"DATABASE_URL": database_url(f"bench{os.getpid()}"), "REDIS_URL": REDIS_URL}
        | bench_environment
        | given,
        cwd=BENCH.parent,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(headline, done.stdout, re.MULTILINE), done.stdout[-3000:]
