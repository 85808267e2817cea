"""Sync ticks that overlap (a slow tick while beat fires the next, two beats by mistake)
change nothing twice: each job's timeline and usage record each event once."""

import pytest

from tests.faults.conftest import BURST, assert_each_change_recorded_once, syncs_overlap_until_final

pytestmark = [pytest.mark.condor, pytest.mark.timeout(900)]


def test_four_syncs_at_once_beside_beat_record_every_change_once(burst):
    jobs = burst.submit(BURST)
    syncs_overlap_until_final(burst)
    assert_each_change_recorded_once(burst, jobs)
