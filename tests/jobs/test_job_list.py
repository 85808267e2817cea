"""My jobs: badges, filters, sorting, pages, and live refresh only while something runs."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job, JobState

pytestmark = pytest.mark.django_db


def make_job(owner, name, state=JobState.IDLE, **fields):
    return Job.objects.create(owner=owner, name=name, state=state, output_dir="/x", **fields)


def test_jobs_filter_by_state_and_name(student_client, student):
    make_job(student, "resnet lr 0.1", JobState.RUNNING)
    make_job(student, "resnet lr 0.01", JobState.COMPLETED)
    make_job(student, "bert", JobState.RUNNING)
    body = student_client.get(reverse("jobs:list"), {"state": "running", "name": "RESNET"})
    text = body.content.decode()
    assert "resnet lr 0.1<" in text
    assert "resnet lr 0.01" not in text and "bert" not in text


def test_jobs_filter_by_date_range(student_client, student):
    old = make_job(student, "last month")
    Job.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=30))
    make_job(student, "today")
    since = (timezone.now() - timedelta(days=1)).date().isoformat()
    text = student_client.get(reverse("jobs:list"), {"submitted_after": since}).content.decode()
    assert "today" in text and "last month" not in text


def test_jobs_sort_by_name(student_client, student):
    for name in ("charlie", "alpha", "bravo"):
        make_job(student, name)
    text = student_client.get(reverse("jobs:list"), {"sort": "name"}).content.decode()
    assert text.index("alpha") < text.index("bravo") < text.index("charlie")


def test_jobs_come_in_pages_of_25(student_client, student):
    for number in range(30):
        make_job(student, f"job {number:02d}")
    first = student_client.get(reverse("jobs:list")).content.decode()
    assert "Page 1 of 2 (30 jobs)" in first and "job 29" in first and "job 04" not in first
    second = student_client.get(reverse("jobs:list"), {"page": 2}).content.decode()
    assert "job 04" in second


def test_the_table_stops_refreshing_once_every_shown_job_has_ended(student_client, student):
    job = make_job(student, "running", JobState.RUNNING)
    fragment = student_client.get(reverse("jobs:list"), {"fragment": 1}).content.decode()
    assert 'data-all-final="false"' in fragment and "<html" not in fragment
    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED)
    fragment = student_client.get(reverse("jobs:list"), {"fragment": 1}).content.decode()
    assert 'data-all-final="true"' in fragment


def test_timing_columns_show_queued_and_running_time(student_client, student):
    now = timezone.now()
    job = make_job(student, "timed", JobState.COMPLETED)
    Job.objects.filter(pk=job.pk).update(
        created_at=now - timedelta(minutes=10),
        started_at=now - timedelta(minutes=7, seconds=30),
        finished_at=now,
    )
    text = student_client.get(reverse("jobs:list")).content.decode()
    assert "2 min 30 s" in text and "7 min 30 s" in text


def test_a_bad_filter_value_is_a_clear_message_not_an_error(student_client, student):
    response = student_client.get(reverse("jobs:list"), {"state": "exploded", "page": "x"})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
