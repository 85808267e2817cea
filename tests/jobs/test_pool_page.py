"""The pool page: every workstation, its GPUs and whether it is free."""

import dataclasses

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_pool_page_lists_every_workstation_with_its_gpus(student_client, fake_bridge):
    body = student_client.get(reverse("pool")).content.decode()
    for name in ("ws-ampere", "ws-volta", "ws-fermi", "ws-office"):
        assert f'data-workstation="{name}"' in body
    assert "Tesla V100-PCIE-16GB" in body
    assert "<strong>4</strong> GPUs" in body


def test_a_workstation_whose_owner_is_back_is_shown_as_unavailable(student_client, fake_bridge):
    fake_bridge.machines[0] = dataclasses.replace(fake_bridge.machines[0], state="Owner")
    body = student_client.get(reverse("pool"), {"fragment": 1}).content.decode()
    assert "Owner is using it" in body
    assert "<strong>3</strong> free now" in body


def test_a_workstations_lending_terms_are_said_and_one_not_lent_now_is_not_free(
    student_client, fake_bridge
):
    from condor_bridge import LendingTerms
    from tests.factories import LabFactory

    LabFactory(name="Vision", accounting_group="group_vision")
    volta = next(i for i, m in enumerate(fake_bridge.machines) if m.name == "ws-volta")
    fake_bridge.machines[volta] = dataclasses.replace(
        fake_bridge.machines[volta],
        terms=LendingTerms(open=False, gpus=1, accounting_groups=("group_vision",)),
    )
    body = student_client.get(reverse("pool"), {"fragment": 1}).content.decode()
    assert "Not lent now (its owners&#x27; terms)" in body
    assert (
        "Lent to Vision only, at most 1 GPU, not now: outside its owners&#x27; hours, or paused"
        in body
    )
    assert "<strong>2</strong> free now" in body  # ws-volta's two GPUs are not


def test_the_page_says_so_when_the_pool_is_down(student_client, fake_bridge):
    fake_bridge.down = True
    body = student_client.get(reverse("pool")).content.decode()
    assert "The pool is not answering." in body


def test_the_pool_page_needs_a_login(client):
    assert client.get(reverse("pool")).status_code == 302


def test_a_workstation_that_stopped_reporting_shows_as_offline(student_client, fake_bridge):
    from jobs import sync

    sync.jobs_sync()  # remembers the four workstations
    fake_bridge.machines = [m for m in fake_bridge.machines if m.name != "ws-fermi"]
    body = student_client.get(reverse("pool"), {"fragment": 1}).content.decode()
    assert 'data-workstation="ws-fermi"' in body
    assert "Offline (last seen" in body
    assert "<strong>1</strong> offline" in body
