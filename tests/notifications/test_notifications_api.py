"""Notification choices and the recent list through the API, as a script would use them."""

import pytest

from notifications import services
from notifications.events import Event

pytestmark = pytest.mark.django_db

URL = "/api/v1/notifications/preferences/"


def test_the_choices_list_every_event_with_its_defaults(api):
    answer = api.get(URL)
    assert answer.status_code == 200
    by_event = {row["event"]: row["channels"] for row in answer.json()}
    assert set(by_event) == set(Event.values)
    assert by_event["job.ended"] == ["push", "webhook"]


def test_changing_one_event_leaves_the_others(api):
    answer = api.put(URL, {"preferences": {"job.ended": ["email"]}}, format="json")
    assert answer.status_code == 200
    by_event = {row["event"]: row["channels"] for row in answer.json()}
    assert by_event["job.ended"] == ["email"]
    assert by_event["job.held"] == ["push", "webhook"]


@pytest.mark.parametrize(
    "change",
    [
        {"preferences": {"job.exploded": ["email"]}},
        {"preferences": {"job.ended": ["pigeon"]}},
        {"preferences": {"job.ended": "email"}},
        {},
    ],
)
def test_an_unknown_event_or_channel_is_refused_and_nothing_changes(api, change):
    answer = api.put(URL, change, format="json")
    assert answer.status_code == 400
    assert "error" in answer.json()
    by_event = {row["event"]: row["channels"] for row in api.get(URL).json()}
    assert by_event["job.ended"] == ["push", "webhook"]


def test_the_recent_list_shows_what_was_sent_and_how(api, student, notify_settings):
    services.notify(
        [
            services.Occasion(
                user=student,
                event=Event.JOB_ENDED,
                key="k",
                title="“mnist” completed",
                also=frozenset({"email"}),
            )
        ]
    )
    [told] = api.get("/api/v1/notifications/").json()
    assert told["title"] == "“mnist” completed"
    assert [(d["channel"], d["state"]) for d in told["deliveries"]] == [("email", "pending")]
