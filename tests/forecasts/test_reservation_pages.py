"""A lab lead reserves workstations from the lab's page; a refusal keeps what was typed and
says why; the pool page shows who holds each workstation and until when."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from forecasts.models import Reservation
from jobs.models import Workstation
from tests.factories import LabFactory, MembershipFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def vision(db):
    now = timezone.now()
    for name, gpus in (("ws-volta", 2), ("ws-ampere", 4), ("ws-office", 0)):
        Workstation.objects.create(name=name, last_seen_at=now, total_gpus=gpus)
    return LabFactory(name="Vision")


@pytest.fixture
def lead_client(client, vision):
    client.force_login(MembershipFactory(lab=vision, role="lead").user)
    return client


def local(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M")


def form_data(**changes) -> dict:
    start = timezone.now() + timedelta(hours=2)
    return {
        "purpose": "Course deadline",
        "starts_at": local(start),
        "ends_at": local(start + timedelta(hours=3)),
        "gpus": "",
        **changes,
    }


def test_the_lab_page_lists_its_reservations_and_offers_a_new_one(lead_client, vision):
    body = lead_client.get(reverse("labs:detail", args=[vision.pk])).content.decode()
    assert "No reservations in the last month or to come." in body
    assert reverse("labs:reservation_new", args=[vision.pk]) in body


def test_the_form_offers_the_gpu_workstations_and_reserves_named_ones(lead_client, vision):
    url = reverse("labs:reservation_new", args=[vision.pk])
    body = lead_client.get(url).content.decode()
    assert "ws-volta (2 GPUs)" in body and "ws-ampere (4 GPUs)" in body
    assert "ws-office" not in body
    answer = lead_client.post(url, form_data(workstations=["ws-volta"]), follow=True)
    made = Reservation.objects.get()
    assert (made.workstations, made.gpus, made.lab) == (["ws-volta"], 2, vision)
    assert "Reserved ws-volta (2 GPUs) for Vision from" in answer.content.decode()
    assert "Course deadline" in answer.content.decode()  # in the lab page's list


def test_a_refused_reservation_keeps_what_was_typed_and_says_why(lead_client, vision):
    url = reverse("labs:reservation_new", args=[vision.pk])
    answer = lead_client.post(url, form_data(purpose="<script>alert(1)</script> demo", gpus="9"))
    body = answer.content.decode()
    assert answer.status_code == 200
    assert "Only 6 GPUs are free to reserve in that window." in body
    assert 'value="&lt;script&gt;alert(1)&lt;/script&gt; demo"' in body
    assert "<script>alert(1)" not in body
    assert not Reservation.objects.exists()


def test_a_lead_cancels_and_a_student_cannot_reach_the_form(client, lead_client, vision):
    start = timezone.now() + timedelta(hours=1)
    made = Reservation.objects.create(
        lab=vision,
        purpose="Demo",
        starts_at=start,
        ends_at=start + timedelta(hours=1),
        workstations=["ws-volta"],
        gpus=2,
    )
    cancel = reverse("labs:reservation_cancel", args=[vision.pk, made.public_id])
    lead_client.post(cancel)
    made.refresh_from_db()
    assert made.cancelled_at is not None
    student = MembershipFactory(lab=vision).user
    client.force_login(student)
    assert client.get(reverse("labs:reservation_new", args=[vision.pk])).status_code == 404


def test_the_pool_page_says_who_holds_a_workstation_now(student_client, fake_bridge, vision):
    start = timezone.now() - timedelta(minutes=5)
    Reservation.objects.create(
        lab=vision,
        purpose="Demo day",
        starts_at=start,
        ends_at=start + timedelta(hours=2),
        workstations=["ws-volta"],
        gpus=2,
    )
    body = student_client.get(reverse("pool")).content.decode()
    assert "Reserved now: reserved for Vision from" in body
    assert "(Demo day)" in body
