"""docs/operations.md names only files that exist, commands that exist, metrics /metrics
exports and tests that exist."""

import re
from pathlib import Path

import pytest
from django.core.management import get_commands

from tests.operations.test_monitoring_files import exported_names

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "operations.md").read_text()

pytestmark = pytest.mark.django_db


def test_every_deploy_file_it_names_exists():
    named = set(re.findall(r"(?<![\w/.])(deploy/production/[\w./@-]*\w)", GUIDE))
    named |= {
        f"deploy/production/{name}"
        for name in re.findall(r"`((?:systemd|nginx|monitoring|container)/[\w.@-]+)`", GUIDE)
    }
    assert len(named) >= 10
    made_by_the_admin = {"deploy/production/container/nightshift.env"}
    for path in sorted(named - made_by_the_admin):
        assert (ROOT / path).exists(), path


def test_every_management_command_it_names_exists():
    named = set(re.findall(r"manage\.py (\w+)", GUIDE))
    assert {"condor_doctor", "drain", "reconcile", "purge_outputs", "migrate"} <= named
    assert named <= set(get_commands())


def test_every_metric_in_its_table_is_exported(client):
    named = set(re.findall(r"`(nightshift_[a-z_]+)[{`]", GUIDE))
    assert len(named) >= 12
    exported = exported_names(client)
    for name in named:  # a histogram is named by its family: its series add _count and more
        assert name in exported or f"{name}_count" in exported, name


def test_every_test_it_cites_exists():
    cited = re.findall(r"`(tests/[\w/]+\.py)`", GUIDE)
    folder = None
    for path in cited:
        assert (ROOT / path).exists(), path
        folder = (ROOT / path).parent
    for name in re.findall(r"`(test_[\w*]+\.py)`", GUIDE):
        assert list(folder.glob(name)) or list((ROOT / "tests").rglob(name)), name
