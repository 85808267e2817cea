"""Deadlines: "finish by Friday 17:00". A job may carry one (form or API); one that has passed,
or that the job's own maximum runtime overruns, is refused; HTCondor takes the user's jobs
with earlier deadlines first; and the form and the job's page say how likely it is."""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from forecasts.model.starts import StartPrediction
from forecasts.texts import deadline_text
from jobs.models import Job
from tests.conftest import script_upload
from tests.factories import LabFactory, MembershipFactory

pytestmark = pytest.mark.django_db

JOBS = reverse("api:job-list")
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def submit(api, **fields):
    return api.post(
        JOBS,
        {"name": "thesis run", "gpus": 0, "script": script_upload(), **fields},
        format="multipart",
    )


def test_a_deadline_from_the_api_orders_the_users_jobs_in_htcondor(api, fake_bridge):
    later = timezone.now() + timedelta(days=3)
    sooner = timezone.now() + timedelta(days=1)
    for finish_by in (later, sooner):
        answer = submit(api, finish_by=finish_by.isoformat(), max_runtime_minutes=120)
        assert answer.status_code == 201, answer.json()
    jobs = list(Job.objects.order_by("created_at"))
    assert jobs[1].request["finish_by_s"] == int(sooner.timestamp())
    from jobs.submission import job_submit_to_pool

    for job in jobs:
        job_submit_to_pool(job.pk)
    priorities = [int(fake_bridge.submitted[str(job.public_id)]["priority"]) for job in jobs]
    assert priorities[1] > priorities[0]


def test_a_job_with_a_deadline_runs_in_its_labs_deadline_lane(api, student, fake_bridge):
    from jobs.submission import job_submit_to_pool

    lab = MembershipFactory(user=student, lab=LabFactory(accounting_group="group_vision")).lab
    urgent = submit(
        api,
        finish_by=(timezone.now() + timedelta(days=1)).isoformat(),
        max_runtime_minutes=60,
        lab=lab.name,
    )
    plain = submit(api, lab=lab.name)
    for answer in (urgent, plain):
        assert answer.status_code == 201, answer.json()
        job_submit_to_pool(Job.objects.get(public_id=answer.json()["id"]).pk)
    lane = fake_bridge.submitted[urgent.json()["id"]]
    assert (lane["accounting_group"], lane["accounting_group_user"]) == (
        "group_vision",
        "deadlines",
    )
    own = fake_bridge.submitted[plain.json()["id"]]
    assert own["accounting_group_user"] == f"{student.username}-{student.pk}"


def test_a_deadline_already_passed_or_overrun_by_the_runtime_is_refused(api, fake_bridge):
    passed = submit(api, finish_by=(timezone.now() - timedelta(hours=1)).isoformat())
    assert passed.status_code == 400
    assert passed.json()["error"]["fields"] == {
        "finish_by": ["Choose a time to finish by that is still to come."]
    }
    overrun = submit(
        api, finish_by=(timezone.now() + timedelta(hours=1)).isoformat(), max_runtime_minutes=180
    )
    assert overrun.status_code == 400
    message = overrun.json()["error"]["fields"]["finish_by"][0]
    assert message.startswith("It cannot finish by then: its maximum runtime alone, started now")
    assert not Job.objects.exists()


def test_the_form_takes_a_deadline_and_keeps_it_on_a_refusal(student_client, fake_bridge):
    too_soon = timezone.localtime(timezone.now() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    answer = student_client.post(
        reverse("jobs:new"),
        {
            "name": "thesis",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 1,
            "max_runtime_minutes": 600,
            "finish_by": too_soon,
            "script": script_upload(),
        },
    )
    body = answer.content.decode()
    assert answer.status_code == 400
    assert "It cannot finish by then" in body
    assert f'value="{too_soon}"' in body


def prediction(earliest_h: float, likely_h: float, latest_h: float | None) -> StartPrediction:
    return StartPrediction(
        made_at=NOW,
        earliest=NOW + timedelta(hours=earliest_h),
        likely=NOW + timedelta(hours=likely_h),
        latest=None if latest_h is None else NOW + timedelta(hours=latest_h),
        within_horizon=1.0,
        futures=32,
        horizon=timedelta(days=2),
    )


@pytest.mark.parametrize(
    ("deadline_h", "said"),
    [
        (30, "very likely (over 90 %)"),  # must start by 20:00, after the latest (16:00)
        (25, "likely (about 70 %)"),  # by 15:00: half way from the likely to the latest
        (24, "uncertain (about 50 %)"),  # by 14:00, the likely start
        (23.25, "unlikely (about 20 %)"),  # by 13:15, a quarter of the way on from the earliest
        (22.5, "unlikely (under 10 %)"),  # by 12:30, before the earliest (13:00)
    ],
)
def test_the_chance_of_finishing_is_read_off_the_predicted_start(deadline_h, said):
    text = deadline_text(
        prediction(1, 2, 4),
        finish_by=NOW + timedelta(hours=deadline_h),
        runtime_s=22 * 3600,
        now=NOW,
    )
    assert f" is {said}: it must start by " in text


def test_without_a_runtime_or_past_reach_the_text_says_what_it_cannot_know():
    start = prediction(1, 2, None)
    friday = NOW + timedelta(days=2)
    assert deadline_text(start, finish_by=friday, runtime_s=None, now=NOW) == (
        "Give a maximum runtime to know whether it can finish by Fri 04 Dec 12:00."
    )
    assert deadline_text(start, finish_by=friday, runtime_s=72 * 3600, now=NOW) == (
        "It cannot finish by Fri 04 Dec 12:00: its maximum runtime would end later."
    )
    # Past the likely start, with no latest (it may wait beyond the horizon): only "possible".
    assert "is possible (over 50 %)" in deadline_text(
        start, finish_by=friday, runtime_s=3600, now=NOW
    )


def test_a_rerun_of_a_job_whose_deadline_passed_runs_without_one(api, student, fake_bridge):
    from jobs.actions import job_rerun

    answer = submit(api, finish_by=(timezone.now() + timedelta(days=1)).isoformat())
    original = Job.objects.get(public_id=answer.json()["id"])
    Job.objects.filter(pk=original.pk).update(
        request={**original.request, "finish_by_s": int(timezone.now().timestamp()) - 3600}
    )
    original.refresh_from_db()
    again = job_rerun(job=original, user=student)
    assert "finish_by_s" not in again.request


def test_the_time_interruptions_and_checkpoints_add_moves_the_start_it_needs_earlier():
    start = prediction(1, 2, 4)
    deadline = NOW + timedelta(hours=6)
    plain = deadline_text(start, finish_by=deadline, runtime_s=3 * 3600, now=NOW)
    assert "it must start by 15:00, and owners' interruptions would add" in plain
    costly = deadline_text(
        start, finish_by=deadline, runtime_s=3 * 3600, now=NOW, interruptions_s=45 * 60
    )
    assert (
        "it must start by 14:15, leaving its maximum runtime and about 45 minutes for "
        "owners' interruptions and its checkpoints." in costly
    )
    # 14:15 is nearer the likely start (14:00) than 15:00 was: a smaller chance.
    assert "likely (about" in plain and "uncertain (about" in costly
    hopeless = deadline_text(
        start,
        finish_by=NOW + timedelta(hours=3, minutes=30),
        runtime_s=3 * 3600,
        now=NOW,
        interruptions_s=3 * 3600,
    )
    assert hopeless == (
        "It is unlikely to finish by 15:30: owners' expected interruptions and "
        "its checkpoints would add about 3.0 hours to its runtime."
    )
