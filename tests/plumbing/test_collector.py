"""Python's cycle collector is paused where work makes many objects that outlive it, and kept
off what a task keeps between its runs (plumbing.collector)."""

import gc
import threading
import weakref

import pytest

from plumbing.collector import KeptBetweenRuns, collector_paused


class Cyclic:
    """An object in a reference cycle with itself: only the cycle collector frees it."""

    def __init__(self) -> None:
        self.me = self


def make_garbage_cycles(count: int) -> None:
    for _ in range(count):
        Cyclic()


def test_no_collection_starts_on_its_own_inside_a_pause(collections):
    assert gc.isenabled()
    with collector_paused():
        make_garbage_cycles(50_000)
        assert collections == []
        assert not gc.isenabled()
    assert gc.isenabled()
    make_garbage_cycles(50_000)
    assert collections, "after the pause, collections start again"


def test_a_pause_leaves_the_collector_off_when_it_was_off():
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_it_pauses_as_a_decorator_and_resumes_when_the_call_raises():
    @collector_paused()
    def failing() -> None:
        assert not gc.isenabled()
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        failing()
    assert gc.isenabled()


def test_pauses_overlapping_in_two_threads_keep_it_off_until_the_last_ends():
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen_after_first: list[bool] = []

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with collector_paused():
            second_in.set()
            first_out.wait(5)
            seen_after_first.append(gc.isenabled())

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen_after_first == [False]
    assert gc.isenabled()


def test_what_a_run_leaves_alive_is_out_of_the_collectors_walks(unfrozen):
    kept = [Cyclic() for _ in range(3)]
    KeptBetweenRuns(full_every=10).run_done()
    walked = {id(obj) for obj in gc.get_objects()}
    assert not any(id(obj) in walked for obj in kept)
    assert gc.get_freeze_count() > 0


def test_a_cycle_dropped_while_frozen_is_freed_by_the_next_full_collection(unfrozen):
    kept_between_runs = KeptBetweenRuns(full_every=3)
    cycle = Cyclic()
    gone = weakref.ref(cycle)
    kept_between_runs.run_done()
    del cycle
    kept_between_runs.run_done()
    gc.collect()
    assert gone() is not None, "frozen, it is not walked by collections in between"
    kept_between_runs.run_done()
    assert gone() is None


def test_the_full_collection_comes_every_so_many_runs(collections, unfrozen):
    kept_between_runs = KeptBetweenRuns(full_every=2)
    for _ in range(4):
        kept_between_runs.run_done()
    assert collections == [1, 2, 1, 2]


def test_a_full_collection_at_least_every_run():
    with pytest.raises(ValueError, match="at least 1"):
        KeptBetweenRuns(full_every=0)
