"""Predicted starts in the portal: the beat's cycle predicts every waiting job from the pool
as it is (on the fake bridge), its page and the API say when it will likely start, and the
first predictions of jobs that have started calibrate later ones."""

import dataclasses
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from accounting.models import CapacitySample
from forecasts.models import StartPrediction
from forecasts.predictions import starts_predict
from forecasts.selectors import job_start_payload
from forecasts.services import forecasts_refit
from jobs.models import Job, JobState
from tests.factories import LabFactory

pytestmark = pytest.mark.django_db

HOUR = 3600


@pytest.fixture
def campus(fake_bridge):
    """Three weeks in which no owner came; now every GPU is busy, ws-volta's two with a
    Nightshift job that has run for one of its two hours."""
    now = timezone.now()
    start = now - timedelta(days=21)
    rows = []
    for machine in fake_bridge.machines:
        moment = start
        while moment < now:
            rows.append(
                CapacitySample(
                    taken_at=moment,
                    seconds=900,
                    workstation=machine.name,
                    total_gpus=machine.total_gpus,
                    idle_gpus=machine.total_gpus,
                )
            )
            moment += timedelta(minutes=15)
    CapacitySample.objects.bulk_create(rows)
    forecasts_refit(now=now)
    fake_bridge.machines = [
        dataclasses.replace(m, state="Claimed", free_gpus=0) for m in fake_bridge.machines
    ]
    return now


def clock(moment) -> str:
    """A time as the pages write it: the day too when it is not today."""
    local = timezone.localtime(moment)
    same_day = local.date() == timezone.localtime().date()
    return f"{local:%H:%M}" if same_day else f"{local:%a %d %b %H:%M}"


def job(owner, lab, *, state, gpus=1, runtime_h=1.0, **fields):
    return Job.objects.create(
        owner=owner,
        lab=lab,
        name="train",
        gpus=gpus,
        output_dir="/none",
        state=state,
        cluster_id=500 + Job.objects.count(),
        proc_id=0,
        request={
            "gpus": gpus,
            "cpus": 1,
            "memory_mb": 1024,
            "max_runtime_s": int(runtime_h * HOUR),
            "script_name": "train.py",
        },
        **fields,
    )


@pytest.fixture
def waiting(campus, student):
    lab = LabFactory()
    job(
        student,
        lab,
        state=JobState.RUNNING,
        gpus=2,
        runtime_h=2,
        workstation="ws-volta",
        started_at=campus - timedelta(hours=1),
    )
    return job(student, lab, state=JobState.IDLE, submitted_at=campus)


def test_a_job_waiting_for_a_run_to_end_is_predicted_to_start_when_it_ends(campus, waiting):
    assert starts_predict(now=campus) == 1
    current = StartPrediction.objects.get(job=waiting, first=False)
    assert current.earliest <= campus + timedelta(hours=1) <= current.latest
    assert current.latest - current.earliest <= timedelta(hours=1)
    assert StartPrediction.objects.filter(job=waiting, first=True).count() == 1


def test_predicting_again_refreshes_the_current_prediction_and_keeps_the_first(campus, waiting):
    starts_predict(now=campus)
    starts_predict(now=campus + timedelta(minutes=10))
    first = StartPrediction.objects.get(job=waiting, first=True)
    current = StartPrediction.objects.get(job=waiting, first=False)
    assert first.made_at == campus and current.made_at == campus + timedelta(minutes=10)


def test_the_job_page_and_the_api_say_when_it_will_likely_start(
    campus, waiting, student_client, api
):
    starts_predict(now=campus)
    page = student_client.get(reverse("jobs:detail", args=[waiting.public_id])).content.decode()
    assert "Likely starts between" in page and "(80 % chance)" in page
    payload = api.get(reverse("api:job-start", args=[waiting.public_id])).json()
    assert payload["waiting"] is True
    assert payload["prediction"]["coverage"] == 0.8
    assert payload["prediction"]["text"].startswith("Likely starts between")
    live = student_client.get(reverse("forecasts:start", args=[waiting.public_id])).json()
    assert live["prediction"]["text"] == payload["prediction"]["text"]
    # Its one-hour maximum runtime, on workstations no owner has touched for three weeks.
    unlikely = "Interruptions are unlikely; checkpoint every 60 minutes anyway."
    assert payload["prediction"]["interruptions"] == unlikely
    assert unlikely in page


def test_a_job_that_does_not_wait_has_no_prediction(campus, waiting):
    starts_predict(now=campus)
    Job.objects.filter(pk=waiting.pk).update(state=JobState.RUNNING)
    waiting.refresh_from_db()
    assert job_start_payload(waiting) == {"waiting": False, "prediction": None}


def test_a_job_nothing_can_run_is_told_it_may_wait_long(campus, student):
    huge = job(student, LabFactory(), state=JobState.IDLE, gpus=4, submitted_at=campus)
    starts_predict(now=campus)
    text = job_start_payload(huge, now=campus)["prediction"]["text"]
    assert text.startswith("It may wait more than 2 days")


def test_starts_later_than_predicted_widen_the_next_ranges(campus, waiting, student):
    starts_predict(now=campus)
    first = StartPrediction.objects.get(job=waiting, first=True)
    # It started three hours after its predicted latest.
    late = first.latest + timedelta(hours=3)
    Job.objects.filter(pk=waiting.pk).update(state=JobState.RUNNING, started_at=late)
    later = job(student, LabFactory(), state=JobState.IDLE, submitted_at=campus)
    starts_predict(now=campus)
    current = StartPrediction.objects.get(job=later, first=False)
    assert current.widened_by > 0
    shown = job_start_payload(later, now=campus)["prediction"]
    assert shown["latest"] - shown["earliest"] > current.latest - current.earliest


def test_the_forms_live_answer_says_when_a_job_of_that_request_would_start(
    campus, waiting, student_client
):
    answer = student_client.get(
        reverse("jobs:match"),
        {
            "gpus": 2,
            "cpus": 1,
            "memory_gb": 1,
            "max_runtime_minutes": 60,
        },
    ).json()
    assert answer["ok"] is True
    # Both of ws-volta's GPUs free up when the running job ends, in about an hour, and the
    # job already waiting (one GPU, of the same user) goes first.
    assert answer["start_text"].startswith("Likely starts between")


def test_with_the_pool_down_the_form_says_so_and_predicts_nothing(
    campus, student_client, fake_bridge
):
    fake_bridge.down = True
    answer = student_client.get(reverse("jobs:match"), {"gpus": 1, "cpus": 1, "memory_gb": 1})
    assert answer.status_code == 503
    assert answer.json()["pool_down"] is True and "start_text" not in answer.json()


@pytest.fixture
def lab_users(campus, student):
    """ws-volta's two GPUs busy for another hour, and two users of one lab: the heavy one has
    used ten GPU-hours lately, the light one none."""
    from accounting.models import UsageRecord
    from tests.factories import UserFactory

    lab = LabFactory()
    job(
        student,
        lab,
        state=JobState.RUNNING,
        gpus=2,
        runtime_h=2,
        workstation="ws-volta",
        started_at=campus - timedelta(hours=1),
    )
    heavy, light = UserFactory(), UserFactory()
    past = job(heavy, lab, state=JobState.COMPLETED, gpus=2, finished_at=campus)
    UsageRecord.objects.create(
        job=past,
        user=heavy,
        lab=lab,
        gpus=2,
        wall_s=10 * HOUR,
        started_at=campus - timedelta(hours=11),
        ended_at=campus - timedelta(hours=1),
    )
    return lab, heavy, light


def test_fair_share_puts_the_light_users_later_job_ahead_of_the_heavy_users(campus, lab_users):
    lab, heavy, light = lab_users
    first = job(heavy, lab, state=JobState.IDLE, gpus=2, submitted_at=campus - timedelta(hours=1))
    second = job(light, lab, state=JobState.IDLE, gpus=2, submitted_at=campus)
    starts_predict(now=campus)
    heavy_start = StartPrediction.objects.get(job=first, first=False).likely
    light_start = StartPrediction.objects.get(job=second, first=False).likely
    # Both need both of ws-volta's GPUs: the light user's job takes them first, in an hour.
    assert light_start < heavy_start
    assert abs((light_start - campus).total_seconds() - HOUR) <= 15 * 60


def test_the_forms_live_answer_expects_interruptions_and_suggests_a_checkpoint_interval(
    campus, student_client
):
    answer = student_client.get(
        reverse("jobs:match"),
        {
            "gpus": 1,
            "cpus": 1,
            "memory_gb": 1,
            "max_runtime_minutes": 600,
        },
    ).json()
    # Three weeks without an owner: interruptions are unlikely, and the longest interval.
    assert answer["interruptions_text"] == (
        "Interruptions are unlikely; checkpoint every 60 minutes anyway."
    )
    without_limit = student_client.get(
        reverse("jobs:match"), {"gpus": 1, "cpus": 1, "memory_gb": 1}
    ).json()
    assert without_limit["interruptions_text"] == ""


def test_the_forms_live_answer_names_the_reservations_that_keep_the_job_off(
    campus, waiting, student, student_client
):
    from forecasts.models import Reservation
    from tests.factories import MembershipFactory

    mine = MembershipFactory(user=student, lab=LabFactory(name="Vision")).lab
    theirs = LabFactory(name="NLP")
    now = timezone.now()
    held = Reservation.objects.create(
        lab=theirs,
        purpose="Demo",
        starts_at=now - timedelta(minutes=5),
        ends_at=now + timedelta(hours=3),
        workstations=["ws-volta"],
        gpus=2,
    )
    asked = {"gpus": 2, "cpus": 1, "memory_gb": 1, "max_runtime_minutes": 60}
    answer = student_client.get(reverse("jobs:match"), asked).json()
    assert answer["reservation_text"].startswith("ws-volta is reserved for NLP from ")
    assert answer["reservation_text"].endswith(": this job will not start there then.")
    # ws-volta is the one workstation with two GPUs: the job starts there when the window ends.
    assert answer["start_text"].startswith("Likely starts between")
    # The form's prediction starts from its own now, a moment after the test's: its first
    # slot after the reservation may begin a few milliseconds past the test's minute.
    said = re.search(r"most likely around (.+)\.$", answer["start_text"]).group(1)
    assert said in {clock(held.ends_at), clock(held.ends_at + timedelta(seconds=1))}
    held.lab = mine
    held.save()
    answer = student_client.get(reverse("jobs:match"), asked).json()
    assert answer["reservation_text"].startswith("Your lab's reservation puts it first on ws-volta")
    assert answer["start_text"].startswith("Likely starts between")


def test_a_deadline_is_judged_on_the_form_and_on_the_waiting_jobs_page(
    campus, waiting, student_client, api
):
    friday = timezone.localtime(campus + timedelta(days=2))
    answer = student_client.get(
        reverse("jobs:match"),
        {
            "gpus": 1,
            "cpus": 1,
            "memory_gb": 1,
            "max_runtime_minutes": 60,
            "finish_by": friday.strftime("%Y-%m-%dT%H:%M"),
        },
    ).json()
    said = f"Finishing by {friday:%a %d %b %H:%M} is very likely"
    assert answer["deadline_text"].startswith(said)
    finish_by_s = int((campus + timedelta(hours=2)).timestamp())
    Job.objects.filter(pk=waiting.pk).update(
        request={**waiting.request, "finish_by_s": finish_by_s}
    )
    starts_predict(now=campus)
    payload = api.get(reverse("api:job-start", args=[waiting.public_id])).json()
    # Its hour of runtime, and a minute for its one checkpoint (no owner came in three weeks),
    # must start within the hour: about when ws-volta frees up.
    start_by = timezone.localtime(datetime.fromtimestamp(finish_by_s - HOUR - 60, tz=UTC))
    # With its day when that is past midnight (a test run after 23:00), as the page says it.
    assert payload["prediction"]["deadline"].startswith("Finishing by ")
    assert (
        f"it must start by {clock(start_by)}, leaving its maximum runtime and about 1 minute"
        in payload["prediction"]["deadline"]
    )


def test_a_reservation_later_today_does_not_delay_a_job_that_can_start_now(
    campus, fake_bridge, student_client
):
    from forecasts.models import Reservation

    fake_bridge.machines = [
        dataclasses.replace(m, state="Unclaimed", free_gpus=m.total_gpus)
        for m in fake_bridge.machines
    ]
    now = timezone.now()
    Reservation.objects.create(
        lab=LabFactory(name="NLP"),
        purpose="Demo",
        starts_at=now + timedelta(hours=6),
        ends_at=now + timedelta(hours=9),
        workstations=["ws-volta"],
        gpus=2,
    )
    answer = student_client.get(
        reverse("jobs:match"),
        {
            "gpus": 2,
            "cpus": 1,
            "memory_gb": 1,
            "max_runtime_minutes": 60,
        },
    ).json()
    assert answer["start_text"] == "Likely to start within 15 minutes."
    assert answer["reservation_text"].startswith("ws-volta is reserved for NLP from ")


def test_a_reservation_that_begins_before_the_gpus_free_up_pushes_the_start_past_it(
    campus, waiting, student_client
):
    from forecasts.models import Reservation

    # ws-volta's two GPUs free up in an hour; NLP holds it from half an hour until four.
    now = timezone.now()
    held = Reservation.objects.create(
        lab=LabFactory(name="NLP"),
        purpose="Demo",
        starts_at=now + timedelta(minutes=30),
        ends_at=now + timedelta(hours=4),
        workstations=["ws-volta"],
        gpus=2,
    )
    answer = student_client.get(
        reverse("jobs:match"),
        {
            "gpus": 2,
            "cpus": 1,
            "memory_gb": 1,
            "max_runtime_minutes": 60,
        },
    ).json()
    # The form's prediction starts from its own now, a moment after the test's: its first
    # slot after the reservation may begin a few milliseconds past the test's minute.
    said = re.search(r"most likely around (.+)\.$", answer["start_text"]).group(1)
    assert said in {clock(held.ends_at), clock(held.ends_at + timedelta(seconds=1))}


def test_a_heavy_users_job_with_a_deadline_is_predicted_ahead_of_a_light_users(campus, lab_users):
    lab, heavy, light = lab_users
    plain = job(light, lab, state=JobState.IDLE, gpus=2, submitted_at=campus - timedelta(hours=1))
    urgent = job(heavy, lab, state=JobState.IDLE, gpus=2, submitted_at=campus)
    urgent.request["finish_by_s"] = int((campus + timedelta(days=1)).timestamp())
    urgent.save()
    starts_predict(now=campus)
    plain_start = StartPrediction.objects.get(job=plain, first=False).likely
    urgent_start = StartPrediction.objects.get(job=urgent, first=False).likely
    # Fair share alone would put the light user first; the lab's deadline lane goes ahead.
    assert urgent_start < plain_start
    assert abs((urgent_start - campus).total_seconds() - HOUR) <= 15 * 60
