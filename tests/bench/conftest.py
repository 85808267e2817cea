"""One migrated database for the quick benchmarks of a test run: each bench makes its own
database as a copy of it (bench/portal_setup.py) instead of migrating one from nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg2
import pytest

from tests.pipeline import database_url

REPO = Path(__file__).resolve().parents[2]


def _administer(statement: str) -> None:
    connection = psycopg2.connect(database_url("postgres"))
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(statement)
    finally:
        connection.close()


@pytest.fixture(scope="session")
def bench_environment() -> Iterator[dict[str, str]]:
    """The environment a quick benchmark runs with: its database made from a migrated one."""
    template = f"nightshift_bench_template_{os.getpid()}"
    _administer(f"DROP DATABASE IF EXISTS {template}")
    _administer(f"CREATE DATABASE {template}")
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
        _administer(f"DROP DATABASE IF EXISTS {template}")
