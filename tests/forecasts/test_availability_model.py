"""The availability model at its edges: a workstation never seen, one with a day of
history, a clock change, no history at all. Each gives a wide range and a low confidence,
never a confident wrong answer; with weeks of history the answers become sharp and right."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from forecasts.model.availability import FREE, TAKEN, UNKNOWN, History, PoolModel

ZONE = ZoneInfo("Europe/Berlin")
MONDAY = datetime(2026, 10, 5, tzinfo=ZONE)  # clocks go back on Sunday 25 October


def office_owner(weeks: int, *, start: datetime = MONDAY, arrive: int = 9, leave: int = 17):
    """An owner at the desk from `arrive` to `leave` local time, Monday to Friday."""
    taken = []
    for day in range(weeks * 7):
        date = (start + timedelta(days=day)).date()
        if date.weekday() < 5:
            midnight = datetime.combine(date, datetime.min.time(), tzinfo=ZONE)
            taken.append((midnight + timedelta(hours=arrive), midnight + timedelta(hours=leave)))
    end = start + timedelta(days=weeks * 7)
    return History.from_intervals(start=start.astimezone(UTC), end=end.astimezone(UTC), taken=taken)


def never_taken(days: float, start: datetime = MONDAY) -> History:
    end = start + timedelta(days=days)
    return History.from_intervals(start=start.astimezone(UTC), end=end.astimezone(UTC), taken=[])


def at(day: int, hour: int, minute: int = 0) -> datetime:
    midnight = datetime.combine(
        (MONDAY + timedelta(days=day)).date(), datetime.min.time(), tzinfo=ZONE
    )
    return midnight + timedelta(hours=hour, minutes=minute)


def test_with_weeks_of_history_a_desk_owner_is_predicted_sharply_and_rightly():
    pool = PoolModel.fit({"desk": office_owner(3)}, zone=ZONE)
    desk = pool.model("desk")
    # Free at 18:00 on a weekday, it stays free all night (until 09:00 the next day)...
    evening = desk.stay_free(at(21, 18), hours=12)
    assert evening.probability > 0.8 and evening.confidence == "high"
    # ...but not for 16 hours: the owner is back at 09:00.
    too_long = desk.stay_free(at(21, 18), hours=16)
    assert too_long.probability < 0.2 and too_long.confidence == "high"
    assert too_long.high < 0.5


def test_a_workstation_never_seen_gets_the_pools_behaviour_with_a_wide_range_and_low_confidence():
    pool = PoolModel.fit({"desk": office_owner(3)}, zone=ZONE)
    stranger = pool.model("never-seen")
    estimate = stranger.stay_free(at(21, 18), hours=12)
    assert estimate.confidence == "low" and estimate.observations == 0
    assert estimate.high - estimate.low > 0.4
    # It borrows the pool's behaviour: what workstations do here, on the whole.
    assert estimate.probability == pytest.approx(pool.stay_free(at(21, 18), 12).probability)


def test_with_no_history_at_all_the_answer_is_an_even_chance_with_the_widest_range():
    pool = PoolModel.fit({}, zone=ZONE)
    estimate = pool.model("anything").stay_free(at(21, 18), hours=8)
    assert estimate.probability == pytest.approx(0.5)
    assert estimate.confidence == "low"
    assert estimate.low < 0.25 and estimate.high > 0.75
    assert pool.model("anything").describe().startswith("Too new to say")


def test_a_day_of_history_is_not_enough_for_a_confident_answer_about_another_day():
    # Seen free all of one Monday: that says little about Wednesday evening.
    pool = PoolModel.fit({"new": never_taken(1)}, zone=ZONE)
    estimate = pool.model("new").stay_free(at(2, 18), hours=12)
    assert estimate.confidence == "low"
    assert estimate.high - estimate.low > 0.3


def test_a_day_of_history_that_contradicts_the_pool_does_not_make_a_confident_wrong_answer():
    # The pool's desks are taken at 09:00; a new machine seen free for one day only.
    pool = PoolModel.fit({"desk": office_owner(3), "new": never_taken(1)}, zone=ZONE)
    estimate = pool.model("new").stay_free(at(21, 18), hours=16)
    assert estimate.confidence == "low"
    # Whatever the truth turns out to be (the pool's habit or the new machine's), the range
    # leaves room for it.
    assert estimate.low < 0.3 and estimate.high > 0.5


def test_hours_are_local_so_an_owner_at_nine_is_expected_at_nine_after_the_clocks_change():
    # Learnt over three weeks of summer time (before 25 October), asked about the week after
    # the change: 09:00 local is now an hour later in UTC.
    pool = PoolModel.fit({"desk": office_owner(2, start=MONDAY)}, zone=ZONE)
    desk = pool.model("desk")
    after_change = at(22, 8)  # Tuesday 27 October, 08:00 CET
    assert after_change.utcoffset() == timedelta(hours=1)
    assert desk.stay_free(after_change, hours=0.75).probability > 0.8  # free until 09:00
    assert desk.stay_free(after_change, hours=1.5).probability < 0.25  # not past it
    assert desk.free_probability(at(22, 10)) < 0.2


def test_a_history_across_the_clock_change_keeps_the_owners_hours():
    history = office_owner(4, start=MONDAY)  # 5 Oct to 1 Nov: both sides of the change
    desk = PoolModel.fit({"desk": history}, zone=ZONE).model("desk")
    assert desk.free_probability(at(29, 10)) < 0.2  # Tuesday 3 November, 10:00 CET
    assert desk.free_probability(at(29, 19)) > 0.8


def test_unknown_slots_count_for_nothing():
    history = office_owner(3)
    blind = History(start=history.start, states=np.full_like(history.states, UNKNOWN))
    estimate = PoolModel.fit({"blind": blind}, zone=ZONE).model("blind").stay_free(at(21, 18), 8)
    assert estimate.observations == 0 and estimate.confidence == "low"


def test_a_run_cut_short_by_the_end_of_history_is_not_counted_as_a_return():
    # Free for the last 6 hours of what was seen: not evidence that it will not stay free
    # for 12.
    states = np.array([TAKEN] * 4 + [FREE] * 24, dtype=np.int8)
    history = History(start=at(0, 12).astimezone(UTC), states=states)
    model = PoolModel.fit({"ws": history}, zone=ZONE).model("ws")
    assert model.stay_free(at(7, 13), hours=12).observations == 0


def test_the_pool_page_sentence_says_when_it_is_free_and_how_often_nights_were_interrupted():
    history = office_owner(3)
    desk = PoolModel.fit({"desk": history}, zone=ZONE).model("desk")
    text = desk.describe(history)
    assert text.startswith("Usually free 17:00-09:00 on weekdays and all weekend")
    assert "reclaimed on 0 of the last" in text


def test_an_owner_who_drops_in_at_night_is_reported_as_reclaiming_nights():
    history = office_owner(2)
    drop_ins = [(at(day, 22).astimezone(UTC), at(day, 23).astimezone(UTC)) for day in (1, 3, 8)]
    taken = [
        (
            history.start + timedelta(seconds=900 * int(i)),
            history.start + timedelta(seconds=900 * (int(i) + 1)),
        )
        for i in np.flatnonzero(history.states == TAKEN)
    ]
    history = History.from_intervals(start=history.start, end=history.end, taken=taken + drop_ins)
    text = PoolModel.fit({"desk": history}, zone=ZONE).model("desk").describe(history)
    assert "reclaimed on 3 of the last" in text
