"""make bench-checkpoints, in its quick mode: it runs from a clean checkout and prints its
table and its headline, so that the figure in docs/benchmarks.md cannot rot unseen."""

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "checkpoints.py"


def test_the_quick_bench_prints_both_policies_and_the_change_in_work_lost():
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    rows = {
        line[:22].strip(): line[22:].split()
        for line in done.stdout.splitlines()
        if line.startswith(("hourly", "by the workstation"))
    }
    assert set(rows) == {"hourly", "by the workstation"}, done.stdout
    for saves, overhead_h, lost_h, goodput in rows.values():
        assert int(saves) > 0 and float(lost_h) >= 0 and 0 < float(goodput) <= 1
    assert re.search(r"^work lost vs hourly: [-+]\d+ %$", done.stdout, re.MULTILINE)
