"""Capacity samples: what each workstation's GPUs were doing, once per interval."""

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from accounting.models import CapacitySample, UsageRecord
from accounting.services import capacity_sample_pool
from jobs.models import Workstation
from tests.factories import UserFactory, job_that_ran

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 2, 22, 7, 30, tzinfo=UTC)


def samples():
    return {
        s.workstation: (
            s.total_gpus,
            s.idle_gpus,
            s.nightshift_gpus,
            s.other_gpus,
            s.unavailable_gpus,
        )
        for s in CapacitySample.objects.all()
    }


def machine(bridge, name, **changes):
    index = next(i for i, m in enumerate(bridge.machines) if m.name == name)
    bridge.machines[index] = dataclasses.replace(bridge.machines[index], **changes)


def test_each_gpu_is_idle_used_by_nightshift_used_by_others_or_unavailable(fake_bridge):
    job = job_that_ran(UserFactory(), gpus=1, start=NOW - timedelta(hours=1))
    UsageRecord.objects.filter(job=job).update(workstation="ws-volta")
    machine(fake_bridge, "ws-volta", free_gpus=0, state="Claimed")  # ours and one other job
    machine(fake_bridge, "ws-fermi", state="Owner")  # its owner is back
    capacity_sample_pool(now=NOW)
    assert samples() == {
        "ws-ampere": (1, 1, 0, 0, 0),
        "ws-volta": (2, 0, 1, 1, 0),
        "ws-fermi": (1, 0, 0, 0, 1),
    }  # ws-office has no GPU: nothing to sample


def test_a_known_workstation_that_stopped_reporting_counts_as_unavailable(fake_bridge):
    Workstation.objects.create(name="ws-turing", last_seen_at=NOW, total_gpus=4)
    capacity_sample_pool(now=NOW)
    assert samples()["ws-turing"] == (4, 0, 0, 0, 4)


def test_two_ticks_in_one_interval_sample_once_dated_at_its_start(fake_bridge):
    capacity_sample_pool(now=NOW)
    capacity_sample_pool(now=NOW + timedelta(seconds=5))
    assert CapacitySample.objects.count() == 3
    interval = settings.CAPACITY_SAMPLE_INTERVAL_S
    assert {s.seconds for s in CapacitySample.objects.all()} == {interval}
    start = CapacitySample.objects.first().taken_at
    assert start <= NOW < start + timedelta(seconds=interval)


def test_beat_samples_the_pool_on_a_schedule():
    entry = settings.CELERY_BEAT_SCHEDULE["sample-capacity"]
    assert entry["task"] == "accounting.tasks.sample_capacity"
    assert entry["schedule"] == settings.CAPACITY_SAMPLE_INTERVAL_S


def test_a_run_the_collector_does_not_show_yet_still_counts_as_nightshifts(fake_bridge):
    job = job_that_ran(UserFactory(), gpus=2, start=NOW - timedelta(seconds=2))
    UsageRecord.objects.filter(job=job).update(workstation="ws-volta")
    # The collector still reports ws-volta's GPUs free: its ads lag a few seconds.
    capacity_sample_pool(now=NOW)
    assert samples()["ws-volta"] == (2, 0, 2, 0, 0)
