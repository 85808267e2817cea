"""The rank a job's submit description carries, evaluated by HTCondor's own ClassAd library
against machine ads that publish the Nightshift figures, agrees with the Python preference
the benchmark simulates."""

import classad2
import pytest

from condor_bridge import placement

DURABLE = {2: 0.99, 4: 0.97, 8: 0.93, 16: 0.85, 24: 0.7}
FLAKY = {2: 0.95, 4: 0.6, 8: 0.3, 16: 0.1, 24: 0.05}


def machine_ad(published):
    return classad2.ClassAd({placement.attribute(hours): p for hours, p in published.items()})


def rank_of(runtime_hours, published):
    return classad2.ExprTree(placement.rank_expression(runtime_hours)).eval(machine_ad(published))


@pytest.mark.parametrize("runtime_hours", [0.5, 1.5, 3, 5, 10, 20, 40])
def test_the_classad_rank_and_the_python_preference_agree(runtime_hours):
    for published in (DURABLE, FLAKY):
        assert rank_of(runtime_hours, published) == pytest.approx(
            placement.preference(published, runtime_hours)
        )


def test_a_long_job_prefers_the_workstation_likely_to_stay_free_for_its_runtime():
    assert rank_of(10, DURABLE) > rank_of(10, FLAKY)


def test_a_short_job_leaves_the_durable_workstation_to_the_long_jobs():
    # Both are safe for half an hour; the flaky one is worth less to a long job.
    assert rank_of(0.5, FLAKY) > rank_of(0.5, DURABLE)


def test_a_short_job_still_avoids_a_workstation_unsafe_for_it():
    unsafe = {2: 0.5, 4: 0.3, 8: 0.1, 16: 0.05, 24: 0.01}
    assert rank_of(1.5, DURABLE) > rank_of(1.5, unsafe)


def test_a_workstation_that_publishes_nothing_ranks_zero_and_a_job_without_runtime_ranks_nothing():
    assert classad2.ExprTree(placement.rank_expression(10)).eval(classad2.ClassAd()) == 0
    assert classad2.ExprTree(placement.rank_expression(0.5)).eval(classad2.ClassAd()) == 0
    assert placement.rank_expression(None) is None


def test_each_runtime_ranks_on_the_published_duration_that_covers_it():
    assert [placement.bucket(h) for h in (0.1, 2, 2.1, 7, 9, 23, 100)] == [2, 2, 4, 8, 16, 24, 24]
