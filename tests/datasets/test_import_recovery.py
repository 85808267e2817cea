"""Imports outlive lost tasks and dead workers: beat's recovery queues a lost import again,
restarts one whose worker died (the upload is still there), gives up after three tries, and
removes the folders nothing owns any more."""

import os
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from datasets import content, services, storage
from datasets.models import DatasetImport
from tests.datasets.files import SAMPLE, upload, write_tree, zip_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def imports_run_here(fake_bridge, monkeypatch):
    """Celery runs in place; starting an import only records it (as if its task was lost)."""
    monkeypatch.setattr(services, "dataset_enqueue_import", lambda pk: None)


def started(user):
    return services.dataset_import_from_upload(
        user=user, name="cats", upload=upload(zip_of(SAMPLE))
    )


def recover(monkeypatch, now=None):
    ran = []
    monkeypatch.setattr(
        services, "dataset_enqueue_import", lambda pk: ran.append(services.dataset_import_run(pk))
    )
    return services.dataset_imports_recover(now=now), ran


def test_an_import_whose_task_was_lost_is_queued_again_and_finishes(student, monkeypatch):
    waiting = started(student)
    report, _ = recover(monkeypatch)
    assert report["queued"] == 0  # too recent to be lost
    report, ran = recover(monkeypatch, now=timezone.now() + timedelta(minutes=11))
    assert report["queued"] == 1 and [r.pk for r in ran] == [waiting.pk]
    waiting.refresh_from_db()
    assert waiting.state == "done" and waiting.version.reference == "cats@1"


def test_an_import_whose_worker_died_starts_again_from_its_upload(student, monkeypatch):
    stalled = started(student)
    # The worker had unpacked half of it when it was killed.
    write_tree(storage.incoming_dir(stalled.public_id) / "tree", {"train.csv": "x,"})
    DatasetImport.objects.filter(pk=stalled.pk).update(
        state="running", attempts=1, heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    report, _ = recover(monkeypatch)
    stalled.refresh_from_db()
    assert report["restarted"] == 1
    assert (stalled.state, stalled.attempts, stalled.version.file_count) == ("done", 2, 4)
    assert not storage.incoming_dir(stalled.public_id).exists()


def test_after_three_interrupted_attempts_the_import_fails_and_its_folder_goes(
    student, monkeypatch
):
    stalled = started(student)
    DatasetImport.objects.filter(pk=stalled.pk).update(
        state="running", attempts=3, heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    report, ran = recover(monkeypatch)
    stalled.refresh_from_db()
    assert (report["failed"], ran) == (1, [])
    assert stalled.state == "failed" and "interrupted 3 times" in stalled.message
    assert not storage.incoming_dir(stalled.public_id).exists()


def test_a_running_import_with_a_recent_heartbeat_is_left_alone(student, monkeypatch):
    running = started(student)
    DatasetImport.objects.filter(pk=running.pk).update(
        state="running", attempts=1, heartbeat_at=timezone.now()
    )
    report, ran = recover(monkeypatch)
    assert (report["restarted"], ran) == (0, [])


def test_old_leftovers_go_and_an_unfinished_imports_folder_stays(student, settings, monkeypatch):
    unfinished = started(student)
    orphan = write_tree(settings.DATASETS_DIR / "incoming" / "orphan", {"x": "1"})
    partial = settings.DATASETS_DIR / "objects" / ".partial-abc.tar"
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_bytes(b"half")
    day_ago = time.time() - 2 * 86400
    for path in (orphan, partial, storage.incoming_dir(unfinished.public_id)):
        os.utime(path, (day_ago, day_ago))
    fresh = write_tree(settings.DATASETS_DIR / "incoming" / "fresh", {"x": "1"})
    report, _ = recover(monkeypatch)
    assert report["removed"] == 2
    assert not orphan.exists() and not partial.exists() and fresh.exists()
    assert storage.incoming_dir(unfinished.public_id).exists()


def test_progress_is_told_within_a_large_file(tmp_path):
    root = write_tree(tmp_path / "a", {"big.bin": os.urandom(3 * 2**20)})
    seen = []
    content.pack(
        root, content.dataset_files(root, content.Limits(10, 10 * 2**20)), None, seen.append
    )
    assert len(seen) > 10 and seen[-1] == 3 * 2**20
