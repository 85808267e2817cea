"""Sync ticks that overlap (a slow tick while beat fires the next, two beats by mistake)
change nothing twice: each job's timeline and usage record each event once."""

import collections
import threading

import pytest
from django.db import connection

from accounting.models import UsageRecord
from jobs import sync
from jobs.models import JobEvent
from tests.faults.conftest import BURST

pytestmark = [pytest.mark.condor, pytest.mark.timeout(900)]


def test_four_syncs_at_once_beside_beat_record_every_change_once(burst):
    jobs = burst.submit(BURST)
    stop = threading.Event()
    errors = []

    def sync_again_and_again():
        try:
            while not stop.is_set():
                sync.jobs_sync()
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=sync_again_and_again) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        burst.wait_until_final()
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert errors == []
    burst.assert_each_ran_once_and_completed()
    ids = [job.pk for job in jobs]
    events = collections.Counter(
        JobEvent.objects.filter(
            job_id__in=ids, kind__in=("submitted", "started", "completed")
        ).values_list("job_id", "kind")
    )
    assert set(events.values()) == {1}, {k: v for k, v in events.items() if v != 1}
    assert len(events) == 3 * BURST
    runs = collections.Counter(UsageRecord.objects.filter(job_id__in=ids)
                               .values_list("job_id", flat=True))  # fmt: skip
    assert sorted(set(runs.values())) == [1]
