"""Start-time predictions, their calibration against what happened, and the expected
interruptions of a run: each through `forecasts.model.starts`, on small campuses whose
answers can be worked out by hand."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from forecasts.model.availability import PoolModel
from forecasts.model.starts import (
    Arrivals,
    Machine,
    RunningJob,
    StartPrediction,
    WaitingJob,
    calibrate,
    expected_interruptions,
    predict_start,
)
from tests.forecasts.test_availability_model import ZONE, at, never_taken, office_owner

HOUR = 3600


def predict(now, machines, pool, *, ahead=(), job=WaitingJob(1, 2 * HOUR), **kwargs):
    return predict_start(
        now=now.astimezone(UTC),
        machines=machines,
        ahead=list(ahead),
        job=job,
        pool=pool,
        rng=np.random.default_rng(5),
        **kwargs,
    )


def test_a_job_with_a_free_workstation_and_nobody_ahead_starts_now():
    pool = PoolModel.fit({"free": never_taken(21)}, zone=ZONE)
    now = at(21, 10)
    prediction = predict(now, [Machine("free", 1, owner_present=False)], pool)
    assert prediction.kind == "now"
    assert prediction.earliest == now
    assert prediction.latest <= now + timedelta(minutes=15)


def test_a_job_waits_for_the_owner_to_leave_at_the_usual_time():
    # The only workstation's owner is at the desk until 17:00 on weekdays; it is 15:00.
    pool = PoolModel.fit({"desk": office_owner(3)}, zone=ZONE)
    now = at(22, 15)
    prediction = predict(now, [Machine("desk", 1, owner_present=True)], pool)
    assert prediction.kind == "waits"
    assert prediction.contains(at(22, 17))
    assert prediction.latest - prediction.earliest <= timedelta(hours=1)


def test_a_job_waits_for_the_job_ahead_of_it_to_finish():
    pool = PoolModel.fit({"free": never_taken(21)}, zone=ZONE)
    now = at(21, 10)
    busy = Machine("free", 1, owner_present=False, running=[RunningJob(1, HOUR, 3 * HOUR)])
    prediction = predict(now, [busy], pool, ahead=[WaitingJob(1, 2 * HOUR)])
    # The running job needs two more hours, the one ahead two after that.
    assert prediction.contains(now + timedelta(hours=4))
    assert not prediction.contains(now + timedelta(hours=1))


def test_jobs_to_come_that_fair_share_puts_first_push_the_start_back():
    pool = PoolModel.fit({"free": never_taken(21)}, zone=ZONE)
    now = at(21, 10)
    busy = Machine("free", 1, owner_present=False, running=[RunningJob(1, 0, HOUR)])
    alone = predict(now, [busy], pool)
    crowded = predict(
        now,
        [busy],
        pool,
        arrivals=Arrivals(per_slot=np.full(168, 0.5), sizes=[WaitingJob(1, HOUR)]),
    )
    assert crowded.likely > alone.likely + timedelta(hours=1)


def test_a_job_no_workstation_matches_is_not_predicted_to_start():
    pool = PoolModel.fit({"free": never_taken(21)}, zone=ZONE)
    prediction = predict(
        at(21, 10), [Machine("free", 1, owner_present=False)], pool, job=WaitingJob(4, HOUR)
    )
    assert prediction.latest is None and prediction.within_horizon == 0


def test_calibration_widens_the_ranges_until_most_past_starts_fall_inside():
    now = datetime(2026, 10, 26, 10, tzinfo=UTC)
    predictions = [
        StartPrediction(
            made_at=now,
            earliest=now + timedelta(minutes=30),
            likely=now + timedelta(minutes=45),
            latest=now + timedelta(hours=1),
            within_horizon=1.0,
            futures=10,
            horizon=timedelta(days=1),
        )
        for _ in range(10)
    ]
    # Every start came at twice the predicted latest wait (counted from one slot before).
    late = now + (timedelta(hours=1) + timedelta(minutes=15)) * 2 - timedelta(minutes=15)
    calibration = calibrate([(p, late) for p in predictions])
    assert calibration.widenings["waits"] == pytest.approx(np.log(2))
    assert calibration.apply(predictions[0]).contains(late)
    assert not predictions[0].contains(late)
    # Starts that fell inside need no widening.
    inside = calibrate([(p, now + timedelta(minutes=40)) for p in predictions])
    assert inside.widenings["waits"] == 0
    assert calibrate([]).apply(predictions[0]) == predictions[0]


def test_a_run_through_the_night_at_an_office_desk_expects_the_morning_interruption():
    desk = PoolModel.fit({"desk": office_owner(3)}, zone=ZONE).model("desk")
    night = {"runtime": timedelta(hours=16), "cost": timedelta(minutes=1)}
    tuesday_night = expected_interruptions(model=desk, start=at(22, 18).astimezone(UTC), **night)
    assert tuesday_night.expected == pytest.approx(1, abs=0.15)  # 09:00, and no more
    friday_night = expected_interruptions(model=desk, start=at(25, 18).astimezone(UTC), **night)
    assert friday_night.expected < 0.2
    assert "checkpoint every" in tuesday_night.text()
    assert tuesday_night.checkpoint_every < friday_night.checkpoint_every
    # What they add: on Friday night sixteen hourly checkpoints of a minute, and little else;
    # on Tuesday night checkpoints every 44 minutes (Young's interval for one interruption in
    # 16 hours) and half an interval of work lost to the morning's interruption.
    assert timedelta(minutes=16) <= friday_night.added <= timedelta(minutes=22)
    assert timedelta(minutes=38) <= tuesday_night.added <= timedelta(minutes=50)


def test_a_window_another_lab_holds_keeps_the_job_from_starting_inside_it():
    pool = PoolModel.fit({"free": never_taken(21)}, zone=ZONE)
    now = at(21, 10)
    busy = Machine("free", 1, owner_present=False, running=[RunningJob(1, HOUR, 2 * HOUR)])
    held = [(now + timedelta(minutes=30), now + timedelta(hours=4))]
    prediction = predict(now, [busy], pool, closed=lambda machine: held)
    # The run ends in an hour, inside the window: the job starts when the window ends.
    assert prediction.contains(now + timedelta(hours=4))
    assert not prediction.contains(now + timedelta(hours=1))
    assert predict(now, [busy], pool).contains(now + timedelta(hours=1))


def test_a_window_that_begins_later_does_not_keep_a_free_workstation_from_the_job_now():
    pool = PoolModel.fit({"free": never_taken(21)}, zone=ZONE)
    now = at(21, 10)
    held = [(now + timedelta(minutes=30), now + timedelta(hours=4))]
    prediction = predict(
        now, [Machine("free", 1, owner_present=False)], pool, closed=lambda machine: held
    )
    assert prediction.kind == "now"
