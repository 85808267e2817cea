"""The quota service at its boundaries, through job_submit as every submission path uses it."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs import actions, specs, submission
from jobs.models import Job, JobState
from labs.models import accounting_group_for
from tests.conftest import script_upload
from tests.factories import LabFactory, MembershipFactory, UserFactory, job_that_ran

pytestmark = pytest.mark.django_db
HOUR = timedelta(hours=1)


def submit(user, *, gpus=1, runtime_minutes=60, lab=None, name="job"):
    runtime = runtime_minutes * 60 if runtime_minutes else None
    spec = specs.JobSpec(
        name=name, gpus=gpus, lab_id=lab.pk if lab else None, max_runtime_s=runtime
    )
    return submission.job_submit(user=user, spec=spec, script=script_upload())


def ran(user, lab, *, gpus, start_ago, end_ago=None, state=JobState.COMPLETED):
    """A job that ran from `start_ago` to `end_ago` (None: still running)."""
    now = timezone.now()
    end = now - end_ago if end_ago is not None else None
    return job_that_ran(
        user,
        lab=lab,
        gpus=gpus,
        start=now - start_ago,
        end=end,
        state=state if end_ago is not None else JobState.RUNNING,
    )


@pytest.fixture
def vision(fake_bridge):
    return LabFactory(name="Vision", gpu_hours=10, gpu_hours_period_days=7)


@pytest.fixture
def ada(vision):
    return MembershipFactory(lab=vision, user=UserFactory(username="ada")).user


def test_a_job_that_fits_exactly_at_the_limit_is_accepted(ada, vision):
    ran(ada, vision, gpus=1, start_ago=10 * HOUR, end_ago=HOUR)  # 9 GPU-hours
    job = submit(ada, gpus=1, runtime_minutes=60)  # needs up to 1 more: exactly 10
    assert job.lab == vision


def test_one_minute_over_the_limit_is_refused_with_usage_and_when_it_frees_up(ada, vision):
    ran(ada, vision, gpus=1, start_ago=10 * HOUR, end_ago=HOUR)
    with pytest.raises(specs.QuotaRefusal) as refused:
        submit(ada, gpus=1, runtime_minutes=61)
    message = refused.value.message
    assert message.startswith("Your lab “Vision” has used 9 of 10 GPU-hours in the last 7 days")
    assert "this job needs up to 1" in message
    frees = timezone.localtime(timezone.now() - HOUR + timedelta(days=7))
    assert f"The next 9 GPU-hours free up on {frees:%b} {frees.day} {frees:%H:%M}" in message
    assert not Job.objects.filter(name="job").exists()


def test_usage_outside_the_rolling_window_does_not_count(ada, vision):
    ran(ada, vision, gpus=4, start_ago=timedelta(days=8), end_ago=timedelta(days=7, minutes=1))
    submit(ada, gpus=1, runtime_minutes=600)  # the whole 10 GPU-hours are free


def test_a_run_across_the_window_edge_counts_only_its_part_inside(ada, vision):
    # 2 GPUs from 7 days + 3 h ago until 7 days - 2 h ago: 2 h inside -> 4 GPU-hours.
    ran(
        ada,
        vision,
        gpus=2,
        start_ago=timedelta(days=7, hours=3),
        end_ago=timedelta(days=7) - 2 * HOUR,
    )
    submit(ada, gpus=1, runtime_minutes=360)  # 4 + 6 = 10
    with pytest.raises(specs.QuotaRefusal):
        submit(ada, gpus=1, runtime_minutes=1)  # the first job's 6 h are now reserved


def test_a_running_job_counts_what_it_used_so_far(ada, vision):
    ran(ada, vision, gpus=2, start_ago=4 * HOUR)  # 8 GPU-hours so far
    submit(ada, gpus=1, runtime_minutes=120)
    with pytest.raises(specs.QuotaRefusal, match="waiting jobs hold 2 more"):
        submit(ada, gpus=1, runtime_minutes=5)


def test_the_whole_labs_usage_counts_against_each_member(ada, vision):
    bob = MembershipFactory(lab=vision, user=UserFactory(username="bob")).user
    ran(bob, vision, gpus=1, start_ago=10 * HOUR, end_ago=0 * HOUR)
    with pytest.raises(specs.QuotaRefusal, match="Your lab “Vision” has used 10 of 10"):
        submit(ada, gpus=1)


def test_a_personal_override_wins_over_the_labs_limit(ada, vision):
    membership = ada.memberships.get()
    membership.gpu_hours = 100
    membership.max_gpus_per_job = 2
    membership.save()
    bob = MembershipFactory(lab=vision, user=UserFactory(username="bob")).user
    ran(bob, vision, gpus=1, start_ago=10 * HOUR, end_ago=0 * HOUR)  # the lab's 10 are gone
    submit(ada, gpus=2, runtime_minutes=60)  # her own 100 count only her jobs
    vision.max_gpus_per_job = 1
    vision.save()
    with pytest.raises(specs.QuotaRefusal, match="may use at most 1 GPU per job"):
        submit(bob, gpus=2)


def test_gpus_per_job_concurrent_gpus_and_waiting_jobs(ada, vision):
    vision.gpu_hours = None
    vision.max_concurrent_gpus = 3
    vision.max_queued_jobs = 2
    vision.save()
    submit(ada, gpus=2)
    with pytest.raises(specs.QuotaRefusal, match="has 2 of 3 GPUs taken by unfinished jobs"):
        submit(ada, gpus=2)
    submit(ada, gpus=0)
    with pytest.raises(specs.QuotaRefusal, match="has 2 jobs waiting to run, the limit of 2"):
        submit(ada, gpus=0)
    Job.objects.filter(gpus=2).update(state=JobState.COMPLETED)
    submit(ada, gpus=2, name="after one ended")


def test_a_runtime_limit_is_imposed_and_a_longer_request_refused(ada, vision):
    vision.max_runtime_hours = 2
    vision.save()
    job = submit(ada, gpus=1, runtime_minutes=None)
    assert job.request["remove_after_s"] == 7200
    assert "periodic_remove" in fake_description(job)
    with pytest.raises(specs.QuotaRefusal, match="at most 2 h"):
        submit(ada, gpus=1, runtime_minutes=121)
    shorter = submit(ada, gpus=0, runtime_minutes=30)
    assert shorter.request["remove_after_s"] is None  # its own, shorter limit holds it


def fake_description(job) -> dict:
    from jobs.bridge import get_bridge

    return get_bridge().description(specs.job_request_of(job))


def test_jobs_carry_the_labs_accounting_group(ada, vision):
    job = submit(ada, gpus=0)
    assert job.request["accounting_group"] == "group_vision"
    assert job.request["accounting_user"] == f"ada-{ada.pk}"
    assert accounting_group_for("Vision & Robotics (2024)") == "group_vision_robotics_2024"


def test_a_user_in_no_lab_gets_the_site_defaults(fake_bridge, settings):
    settings.QUOTA_DEFAULTS = settings.QUOTA_DEFAULTS | {"max_gpus_per_job": 1}
    loner = UserFactory(username="loner")
    with pytest.raises(specs.QuotaRefusal, match="You may use at most 1 GPU per job"):
        submit(loner, gpus=2)
    assert submit(loner, gpus=1).request["accounting_group"] == "nightshift"


def test_a_lab_that_is_not_yours_is_refused(ada, fake_bridge):
    other = LabFactory(name="NLP")
    with pytest.raises(specs.JobSubmissionError, match="not a member of that lab"):
        submit(ada, lab=other)


def test_rerun_and_clone_are_checked_too(ada, vision):
    job = submit(ada, gpus=1, runtime_minutes=300)
    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED)
    vision.gpu_hours = 1
    vision.save()
    with pytest.raises(specs.QuotaRefusal):
        actions.job_rerun(job=job, user=ada)


@pytest.mark.django_db(transaction=True)
def test_two_submissions_racing_for_the_last_gpu_hour_do_not_both_get_through(
    fake_bridge, monkeypatch
):
    lab = LabFactory(name="Racing", gpu_hours=10)
    racers = [MembershipFactory(lab=lab, user=UserFactory(username=f"r{i}")).user for i in (1, 2)]
    ran(racers[0], lab, gpus=1, start_ago=10 * HOUR, end_ago=HOUR)  # 1 GPU-hour left
    both_checked = threading.Barrier(2, timeout=20)
    real_lock = submission.quota_lock

    def lock_after_both_checked(user, lab):
        both_checked.wait()  # each passed the early check; now they race for the lock
        real_lock(user, lab)

    monkeypatch.setattr(submission, "quota_lock", lock_after_both_checked)
    outcomes = []

    def race(user):
        try:
            submit(user, gpus=1, runtime_minutes=60, lab=lab)
            outcomes.append("accepted")
        except specs.QuotaRefusal:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=race, args=(user,)) for user in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == ["accepted", "refused"]
    assert Job.objects.filter(name="job").count() == 1
