"""The account page: each of the user's labs, with its limits and usage as bars."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.factories import LabFactory, MembershipFactory, job_that_ran

pytestmark = pytest.mark.django_db


def test_the_page_shows_each_lab_with_usage_bars(student_client, student):
    vision = LabFactory(name="Vision", gpu_hours=20, max_concurrent_gpus=4, max_runtime_hours=12)
    MembershipFactory(lab=vision, user=student, role="lead")
    MembershipFactory(lab=LabFactory(name="NLP"), user=student, max_gpus_per_job=1)
    now = timezone.now()
    job_that_ran(student, lab=vision, gpus=2, start=now - timedelta(hours=5))
    body = student_client.get(reverse("accounts:account")).content.decode()
    assert "Vision" in body and "NLP" in body
    assert "Lab lead" in body
    assert "10 h of 20 h" in body  # 2 GPUs x 5 h
    assert 'data-percent="50"' in body
    assert "2 of 4" in body
    assert "Jobs are removed after 12 h of running." in body
    assert "At most 1 GPU per job." in body
    assert "group_vision" in body


def test_a_user_in_no_lab_sees_the_site_defaults(student_client, settings):
    settings.QUOTA_DEFAULTS = settings.QUOTA_DEFAULTS | {"gpu_hours": 5.0}
    body = student_client.get(reverse("accounts:account")).content.decode()
    assert "the site's default limits apply" in body
    assert "0 h of 5 h" in body
