"""Upgrades run `migrate` while the old version still serves (docs/operations.md), so every
migration must leave the old code working: add first, remove later. django-migration-linter
reads each migration's SQL and names what would break the running version."""

import pytest
from django_migration_linter import MigrationLinter

pytestmark = pytest.mark.django_db

OUR_APPS = [
    "accounts",
    "labs",
    "audit",
    "jobs",
    "accounting",
    "operations",
    "experiments",
    "environments",
    "live_sessions",
    "usage",
    "forecasts",
    "model_registry",
    "job_templates",
]
# Made before the first release, when no old version was serving: each adds a NOT NULL
# column with a Python-side default, which an old version's INSERT would not fill. New
# columns use db_default (or null=True) instead; this list never grows.
BEFORE_THE_FIRST_RELEASE = [
    "accounting.0003_usagerecord_saved_s",
    "jobs.0002_hold_subcode_and_wait_reason",
    "jobs.0003_job_notify_by_email",
    "jobs.0004_job_source",
    "jobs.0007_job_gpu_model",
    "jobs.0009_job_lab_and_gpus",
    "jobs.0010_job_outcome",
    "jobs.0013_reproducibility_record",
    "jobs.0015_studies",
    "labs.0002_lab_ldap_group_membership_source",
]


def lint(ignore: list[str]) -> MigrationLinter:
    linter = MigrationLinter(
        no_cache=True,
        include_apps=OUR_APPS,
        ignore_initial_migrations=True,
        no_output=True,
        ignore_name=[name.split(".", 1)[1] for name in ignore],
    )
    linter.lint_all_migrations()
    return linter


def test_every_migration_since_the_first_release_is_safe_beside_the_old_version():
    linter = lint(BEFORE_THE_FIRST_RELEASE)
    assert linter.nb_erroneous == 0
    assert linter.nb_total > 50


def test_the_linter_catches_a_column_the_old_version_cannot_fill():
    """Without the baseline the old migrations are caught: the check can fail."""
    assert lint([]).nb_erroneous == len(BEFORE_THE_FIRST_RELEASE)
