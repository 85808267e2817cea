"""The owners' API: their workstations, terms they read and set, and asking one back."""

import pytest
from django.urls import reverse

from lending.models import LendingTerms, Reclaim, WorkstationOwner
from tests.conftest import client_with_token
from tests.factories import LabFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def api():
    user = UserFactory(username="prof")
    WorkstationOwner.objects.create(workstation="ws-volta", user=user)
    return client_with_token(user)


def terms_url(name="ws-volta"):
    return reverse("api:workstation-terms", kwargs={"workstation": name})


def test_an_owner_lists_reads_and_sets_terms(api):
    assert api.get(reverse("api:workstation-list")).json() == [{"workstation": "ws-volta"}]
    assert api.get(terms_url()).json()["days"] == [0, 1, 2, 3, 4, 5, 6]
    LabFactory(name="Vision")
    body = {"days": [5, 6], "max_gpus": 1, "labs": ["Vision"], "only_while_away": True}
    answer = api.put(terms_url(), body, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["labs"] == ["Vision"]
    terms = LendingTerms.objects.get(workstation="ws-volta")
    assert (terms.days, terms.max_gpus, terms.only_while_away) == ([5, 6], 1, True)


def test_terms_naming_a_lab_that_does_not_exist_or_hours_backwards_are_refused(api):
    answer = api.put(terms_url(), {"days": [1], "labs": ["No such lab"]}, format="json")
    assert answer.status_code == 400
    answer = api.put(
        terms_url(), {"days": [1], "from_minute": 600, "until_minute": 540}, format="json"
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {
        "until_minute": ["The end of the hours must come after their start."]
    }
    assert not LendingTerms.objects.exists()


def test_another_persons_workstation_is_404_and_a_hostile_name_too(api):
    WorkstationOwner.objects.create(workstation="ws-ampere", user=UserFactory())
    assert api.get(terms_url("ws-ampere")).status_code == 404
    assert api.get(terms_url("..%2Fetc")).status_code == 404
    reclaim = reverse("api:workstation-reclaim", kwargs={"workstation": "ws-ampere"})
    assert api.post(reclaim, {"minutes": 5}, format="json").status_code == 404
    assert not Reclaim.objects.exists()


def test_asking_it_back_through_the_api_and_lending_it_again(api):
    url = reverse("api:workstation-reclaim", kwargs={"workstation": "ws-volta"})
    answer = api.post(url, {"minutes": 10}, format="json")
    assert answer.status_code == 201
    assert 540 < answer.json()["seconds_left"] <= 600
    assert api.delete(url).status_code == 204
    assert Reclaim.objects.get().ended_at is not None
