"""A workstation's page, for its owners and admins: what it does now (labs, never people),
what it gave per week with a CSV, its lending terms, and "I need it back" with a countdown."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from accounting.models import UsageRecord
from audit.models import AuditEntry
from jobs.models import Job, JobState
from lending.models import LendingTerms, Reclaim, WorkstationOwner
from tests.factories import LabFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(client):
    user = UserFactory(username="prof")
    WorkstationOwner.objects.create(workstation="ws-volta", user=user)
    client.force_login(user)
    return user


def page(client, name="ws-volta"):
    return client.get(reverse("lending:workstation", args=[name]))


def test_an_owner_finds_their_workstation_from_the_menu(client, owner):
    listing = client.get(reverse("lending:list")).content.decode()
    assert 'href="/workstations/ws-volta/"' in listing
    assert "My workstations" in client.get(reverse("jobs:list")).content.decode()


def test_a_stranger_gets_404_for_a_workstation_that_is_not_theirs(client, owner):
    client.force_login(UserFactory(username="someone"))
    assert page(client).status_code == 404
    assert "My workstations" not in client.get(reverse("jobs:list")).content.decode()


def test_the_page_names_the_labs_running_there_and_never_the_students(client, owner, fake_bridge):
    vision = LabFactory(name="Vision")
    student = MembershipFactory(lab=vision, user=UserFactory(username="alice-student")).user
    Job.objects.create(
        owner=student,
        lab=vision,
        name="secret-project-name",
        state=JobState.RUNNING,
        workstation="ws-volta",
        request={"gpus": 1},
    )
    text = page(client).content.decode()
    assert "Running 1 job for" in text and "Vision" in text
    assert "alice-student" not in text and "secret-project-name" not in text


def test_what_it_gave_is_counted_per_week_and_downloads_as_csv(client, owner):
    vision = LabFactory(name="Vision")
    student = UserFactory()
    job = Job.objects.create(owner=student, lab=vision, name="j", state=JobState.COMPLETED)
    started = timezone.now() - timedelta(hours=3)
    UsageRecord.objects.create(
        job=job,
        user=student,
        lab=vision,
        started_at=started,
        ended_at=started + timedelta(hours=2),
        workstation="ws-volta",
        gpus=2,
        wall_s=7200,
    )
    UsageRecord.objects.create(
        job=job,
        user=student,
        lab=vision,
        started_at=started - timedelta(days=1),
        ended_at=started,
        workstation="ws-ampere",  # another workstation's: not counted here
        gpus=1,
        wall_s=3600,
    )
    text = page(client).content.decode()
    assert "4.0 GPU-hours</strong> to 1 student: 1 job of 1 lab (Vision)." in text
    csv = b"".join(client.get(reverse("lending:given_csv", args=["ws-volta"])).streaming_content)
    lines = csv.decode().splitlines()
    assert lines[0] == "week,gpu_hours,jobs,labs,gpu_kwh_above_idle"
    # The week the run started in (campus time), which is the week before this one for the
    # first three hours of a Monday.
    day = timezone.localtime(started).date()
    week = (day - timedelta(days=day.weekday())).isoformat()
    assert f"{week},4.0,1,1," in lines  # no energy measured
    assert sum(float(line.split(",")[1]) for line in lines[1:]) == 4.0


def test_an_owner_sets_terms_and_sees_them_said_in_words(client, owner):
    vision = LabFactory(name="Vision")
    answer = client.post(
        reverse("lending:terms", args=["ws-volta"]),
        {
            "days": ["0", "1", "2", "3", "4"],
            "from_time": "18:00",
            "until_time": "",
            "only_while_away": "on",
            "away_after_minutes": "20",
            "max_gpus": "1",
            "labs": [vision.pk],
        },
    )
    assert answer.status_code == 302
    terms = LendingTerms.objects.get(workstation="ws-volta")
    assert (terms.days, terms.from_minute, terms.until_minute) == ([0, 1, 2, 3, 4], 1080, 1440)
    text = page(client).content.decode()
    assert (
        "Lent weekdays, 18:00 to 00:00, only while you are away (20 minutes without keyboard "
        "or mouse), at most 1 GPU, to Vision only." in text
    )
    assert AuditEntry.objects.filter(action="lending.terms_set").exists()


def test_bad_terms_are_refused_with_the_reason_and_nothing_changes(client, owner):
    answer = client.post(
        reverse("lending:terms", args=["ws-volta"]),
        {"days": [], "from_time": "18:00", "until_time": "09:00", "away_after_minutes": "0"},
    )
    assert answer.status_code == 400
    text = answer.content.decode()
    assert "This field is required." in text  # no day chosen
    assert not LendingTerms.objects.exists()
    answer = client.post(
        reverse("lending:terms", args=["ws-volta"]),
        {"days": ["5"], "from_time": "18:00", "until_time": "09:00", "away_after_minutes": "5"},
    )
    assert answer.status_code == 400
    assert "The end of the hours must come after their start." in answer.content.decode()
    assert not LendingTerms.objects.exists()


def test_i_need_it_back_shows_a_countdown_and_lend_again_ends_it(client, owner):
    answer = client.post(reverse("lending:reclaim", args=["ws-volta"]), {"minutes": "5"})
    assert answer.status_code == 302
    reclaim = Reclaim.objects.get(workstation="ws-volta")
    assert timedelta(minutes=4) < reclaim.deadline - timezone.now() <= timedelta(minutes=5)
    text = page(client).content.decode()
    assert 'data-role="reclaim"' in text and "data-countdown=" in text
    # Said as the page's script goes on to say it ("4 min 59 s"), not "299 s".
    assert re.search(r'data-countdown="\d+">[45] min \d+ s<', text)
    assert AuditEntry.objects.filter(action="lending.reclaim").exists()
    client.post(reverse("lending:lend_again", args=["ws-volta"]))
    reclaim.refresh_from_db()
    assert reclaim.ended_at is not None
    assert 'data-role="reclaim"' not in page(client).content.decode()


def test_asking_again_only_brings_the_deadline_closer(client, owner):
    client.post(reverse("lending:reclaim", args=["ws-volta"]), {"minutes": "30"})
    client.post(reverse("lending:reclaim", args=["ws-volta"]), {"minutes": "2"})
    client.post(reverse("lending:reclaim", args=["ws-volta"]), {"minutes": "60"})
    [reclaim] = Reclaim.objects.all()
    assert reclaim.deadline - timezone.now() <= timedelta(minutes=2)


def test_a_reclaim_of_zero_or_hours_of_minutes_is_refused(client, owner):
    for minutes in ("0", "241", "soon"):
        answer = client.post(reverse("lending:reclaim", args=["ws-volta"]), {"minutes": minutes})
        assert answer.status_code == 400
    assert not Reclaim.objects.exists()


def test_a_jobs_timeline_says_its_workstations_owner_asked_for_it_back(owner):
    from jobs.timeline import eviction_source
    from lending.services import reclaim_request

    assert eviction_source("ws-volta", timezone.now()) == "ws-volta was reclaimed by its owner"
    reclaim_request(user=owner, workstation="ws-volta", minutes=1)
    said = eviction_source("ws-volta", timezone.now() + timedelta(seconds=30))
    assert said == "ws-volta's owner asked for it back"
    assert eviction_source("ws-ampere", timezone.now()) == "ws-ampere was reclaimed by its owner"
    # Lent again, the workstation's later evictions are its owner's return, not the request.
    from lending.services import reclaim_end

    reclaim_end(user=owner, workstation="ws-volta")
    later = eviction_source("ws-volta", timezone.now() + timedelta(minutes=10))
    assert later == "ws-volta was reclaimed by its owner"


def test_what_it_gave_is_also_counted_per_term_of_the_campus(client, owner, settings):
    from datetime import date, datetime, time

    from lending.selectors import given_by_term, term_starts_before

    settings.TERM_STARTS = [(1, 15), (9, 1)]
    assert term_starts_before(date(2026, 12, 6), 3) == [
        date(2025, 9, 1),
        date(2026, 1, 15),
        date(2026, 9, 1),
    ]
    student = UserFactory()
    job = Job.objects.create(owner=student, name="j", state=JobState.COMPLETED)
    now = timezone.now()
    [this_term] = term_starts_before(timezone.localdate(now), 1)
    early_in_it = timezone.make_aware(datetime.combine(this_term, time(1)))
    for started, kwh in ((early_in_it, 0.5), (early_in_it - timedelta(days=500), 9.0)):
        UsageRecord.objects.create(
            job=job,
            user=student,
            started_at=started,
            ended_at=started + timedelta(hours=1),
            workstation="ws-volta",
            gpus=1,
            wall_s=3600,
            gpu_energy_kwh=kwh,
        )
    terms = given_by_term("ws-volta", now=now)
    assert [len(t.tally.jobs) for t in terms][-1] == 1  # this term's run, not last year's
    assert terms[-1].kwh == 0.5 and sum(t.tally.gpu_hours for t in terms) == 1.0
    text = page(client).content.decode()
    assert 'data-role="given-terms"' in text and "500 Wh" not in text
    csv = b"".join(
        client.get(
            reverse("lending:given_csv", args=["ws-volta"]), {"by": "term"}
        ).streaming_content
    ).decode()
    lines = csv.splitlines()
    assert lines[0] == "term_starts,term_ends,gpu_hours,students,jobs,labs,gpu_kwh_above_idle"
    assert lines[-1].endswith(",1.0,1,1,0,0.5")
