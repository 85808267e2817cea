"""A sync cycle runs without Python's cycle collector walking the whole process mid-cycle, and
leaves what it keeps between cycles (rows, observations) out of the collector's walks."""

import gc

import pytest

from condor_bridge import JobState as CondorState
from jobs import sync
from tests.jobs.test_sync_phases import submitted
from tests.plumbing.test_collector import make_garbage_cycles

pytestmark = pytest.mark.django_db


@pytest.fixture
def wasteful_schedd(fake_bridge, monkeypatch):
    """A schedd whose answer leaves 50,000 garbage cycles behind: enough to start many
    collections, were the collector on."""
    answer = fake_bridge.active_jobs

    def wastefully():
        make_garbage_cycles(50_000)
        return answer()

    monkeypatch.setattr(fake_bridge, "active_jobs", wastefully)
    return fake_bridge


def test_a_cycle_starts_no_collection_of_its_own_accord(
    wasteful_schedd, student, collections, unfrozen
):
    job = submitted(student)
    wasteful_schedd.set_state(str(job.public_id), CondorState.RUNNING)
    # Counting from an empty young generation: the few objects made on the way in start none.
    gc.collect()
    collections.clear()
    report = sync.jobs_sync()
    assert report.changed == 1
    # One collection, at the end of the cycle, of what the cycle made (or, every so many
    # cycles, of everything).
    assert collections in ([1], [2])
    assert gc.isenabled()


def test_what_a_cycle_keeps_is_frozen_afterwards(fake_bridge, student, unfrozen):
    submitted(student)
    gc.unfreeze()
    sync.jobs_sync()
    assert gc.get_freeze_count() > 0


def test_a_failed_cycle_turns_the_collector_back_on(fake_bridge, student, monkeypatch):
    submitted(student)

    def broken():
        raise RuntimeError("the bridge broke")

    monkeypatch.setattr(fake_bridge, "active_jobs", broken)
    with pytest.raises(RuntimeError):
        sync.jobs_sync()
    assert gc.isenabled()
