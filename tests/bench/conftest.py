"""One migrated database for the quick benchmarks of a test run: each bench makes its own
database as a copy of it (bench/portal_setup.py) instead of migrating one from nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.pipeline import REPO, admin_sql, database_url


@pytest.fixture(scope="session")
def bench_environment() -> Iterator[dict[str, str]]:
    """The environment a quick benchmark runs with: its database made from a migrated one."""
    template = f"nightshift_bench_template_{os.getpid()}"
    admin_sql(f"DROP DATABASE IF EXISTS {template}")
    admin_sql(f"CREATE DATABASE {template}")
    try:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
            cwd=REPO,
            env=os.environ | {"DATABASE_URL": database_url(template)},
            check=True,
            timeout=600,
        )
        yield {"NIGHTSHIFT_BENCH_DATABASE_TEMPLATE": template}
    finally:
        admin_sql(f"DROP DATABASE IF EXISTS {template}")
