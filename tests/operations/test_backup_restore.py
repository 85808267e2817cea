"""deploy/production/backup and restore: a backup restored into a fresh database, after the
job storage was lost, gives back every job, its timeline and its outputs, as the portal
itself reads them."""

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg2
import pytest
from django.db import connection

from audit.models import AuditEntry
from jobs import specs, submission
from jobs.models import Job
from tests.conftest import script_upload
from tests.pipeline import admin_sql, database_url

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db(transaction=True)

# What the portal itself says about every job, read through its own selectors.
READ_JOBS = """
import json
from jobs.models import Job
from jobs.selectors import job_output_files
print(json.dumps({str(job.public_id): {
    "name": job.name, "owner": job.owner.username, "state": job.state,
    "events": list(job.events.order_by("id").values_list("kind", flat=True)),
    "outputs": [[f.path, f.size] for f in job_output_files(job)],
} for job in Job.objects.all()}, sort_keys=True))
"""


@pytest.fixture
def fresh_database():
    name = f"nightshift_restore_{uuid.uuid4().hex[:10]}"
    admin_sql(f'CREATE DATABASE "{name}"')
    yield name
    admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(script: str, *args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ROOT / "deploy" / "production" / script), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def portal_view(database: str, jobs_dir: Path) -> dict:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(database),
        "NIGHTSHIFT_JOBS_DIR": str(jobs_dir),
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", READ_JOBS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_backup_restores_into_a_fresh_database_with_jobs_and_outputs(
    student, fake_bridge, settings, tmp_path, fresh_database
):
    jobs_dir = settings.JOBS_DIR
    for n in range(3):
        job = submission.job_submit(
            user=student, spec=specs.JobSpec(name=f"run {n}"), script=script_upload()
        )
        submission.job_submit_to_pool(job.pk)
        (job.directory / "outputs" / "model.pt").write_bytes(os.urandom(2048 + n))
    checkpoint = (job.directory / "outputs" / "model.pt").read_bytes()
    staged = jobs_dir / ".staging" / "upload-in-progress"
    staged.parent.mkdir(parents=True)
    staged.write_text("half an upload")
    before = portal_view(connection.settings_dict["NAME"], jobs_dir)
    assert len(before) == 3 and all(j["outputs"] for j in before.values())

    # A stored archive (a dataset's or a published model's), and an import under way.
    store = settings.DATASETS_DIR
    (store / "objects").mkdir(parents=True)
    archive = store / "objects" / f"{'a' * 64}.tar"
    archive.write_bytes(os.urandom(4096))
    (store / "objects" / ".partial-1.tar").write_bytes(b"half")
    (store / "incoming" / "import-1").mkdir(parents=True)
    env = {
        "DATABASE_URL": database_url(connection.settings_dict["NAME"]),
        "NIGHTSHIFT_JOBS_DIR": str(jobs_dir),
        "NIGHTSHIFT_DATASETS_DIR": str(store),
    }
    made = run("backup", str(tmp_path / "backups"), env=env)
    assert made.returncode == 0, made.stderr
    [backup] = (tmp_path / "backups").iterdir()
    assert {p.name for p in backup.iterdir()} == {
        "database.dump",
        "jobs.tar",
        "datasets.tar",
        "SHA256SUMS",
        "MANIFEST",
    }
    assert oct(backup.stat().st_mode)[-3:] == "700"
    kept = archive.read_bytes()

    shutil.rmtree(jobs_dir)  # the disk is gone
    shutil.rmtree(store)
    restored = run(
        "restore", str(backup), env={**env, "DATABASE_URL": database_url(fresh_database)}
    )
    assert restored.returncode == 0, restored.stderr
    assert portal_view(fresh_database, jobs_dir) == before
    assert (job.directory / "outputs" / "model.pt").read_bytes() == checkpoint
    assert not (jobs_dir / ".staging").exists()
    assert archive.read_bytes() == kept
    assert not (store / "incoming").exists() and not (store / "objects" / ".partial-1.tar").exists()
    restored_db = psycopg2.connect(database_url(fresh_database))
    try:
        with restored_db.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM audit_auditentry")
            assert cursor.fetchone()[0] == AuditEntry.objects.count()
    finally:
        restored_db.close()
    migrations = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DATABASE_URL": database_url(fresh_database)},
    )
    assert migrations.returncode == 0, migrations.stdout + migrations.stderr
    assert Job.objects.count() == 3


def test_restore_refuses_a_database_in_use_and_a_damaged_backup(
    student, fake_bridge, settings, tmp_path, fresh_database
):
    env = {
        "DATABASE_URL": database_url(connection.settings_dict["NAME"]),
        "NIGHTSHIFT_JOBS_DIR": str(settings.JOBS_DIR),
    }
    settings.JOBS_DIR.mkdir(parents=True, exist_ok=True)
    assert run("backup", str(tmp_path / "b"), env=env).returncode == 0
    [backup] = (tmp_path / "b").iterdir()
    into_the_live_one = run(
        "restore", str(backup), env={**env, "NIGHTSHIFT_JOBS_DIR": str(tmp_path / "elsewhere")}
    )
    assert into_the_live_one.returncode == 1
    assert "already has" in into_the_live_one.stderr and "--force" in into_the_live_one.stderr
    with open(backup / "jobs.tar", "ab") as archive:
        archive.write(b"bit rot")
    damaged = run("restore", str(backup), env={**env, "DATABASE_URL": database_url(fresh_database)})
    assert damaged.returncode == 1
    assert "do not match their checksums" in damaged.stderr
