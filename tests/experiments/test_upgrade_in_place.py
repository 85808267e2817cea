"""A database from before experiments had its own app (sweeps lived in jobs) migrates forward
in place: the jobs, the sweeps, a study with its trials and the usage records all read back
the same through the portal, and the admin's history of a sweep follows it."""

from datetime import timedelta

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse
from django.utils import timezone

from experiments.models import Sweep
from jobs.models import Job
from tests.conftest import client_with_token

# Main before the split: every app at its latest migration then, experiments (and
# environments, datasets, live sessions, usage, forecasts, models and templates, which came
# later) not there.
BEFORE_THE_SPLIT = [
    ("jobs", "0016_output_retention"),
    ("experiments", None),
    ("environments", None),
    ("datasets", None),
    ("live_sessions", None),
    ("usage", None),
    ("forecasts", None),
    ("job_templates", None),
    ("model_registry", None),
]
STUDY_PLAN = {
    "space": {"lr": {"kind": "log_uniform", "low": 1e-5, "high": 0.1}},
    "objective": "loss",
    "direction": "minimize",
    "max_trials": 2,
    "parallel": 2,
    "sampler": "tpe",
    "pruner": "median",
    "gpu_hours": None,
    "deadline_minutes": None,
    "seed": 7,
}


def latest():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def migrate(targets):
    """Migrate to `targets`; the models as they were there."""
    MigrationExecutor(connection).migrate(targets)
    apps_at = {app: name for app, name in latest()} | dict(targets)
    nodes = [(app, name) for app, name in apps_at.items() if name is not None]
    return MigrationExecutor(connection).loader.project_state(nodes).apps


def fill_the_old_database(apps) -> dict:
    """What a portal at today's main holds, written through that version's models. Every
    job has ended, so that the test's Celery worker leaves them alone."""
    user = apps.get_model("auth", "User").objects.create(username="ada", email="ada@uni.test")
    lab = apps.get_model("labs", "Lab").objects.create(
        name="Vision", accounting_group="group_vision"
    )
    apps.get_model("labs", "Membership").objects.create(lab=lab, user=user, role="member")
    OldSweep = apps.get_model("jobs", "Sweep")
    OldJob = apps.get_model("jobs", "Job")
    UsageRecord = apps.get_model("accounting", "UsageRecord")
    now = timezone.now()
    grid = OldSweep.objects.create(
        owner=user,
        lab=lab,
        name="lr grid",
        kind="grid",
        definition={"grid": {"lr": [0.1, 0.01]}},
        cluster_id=41,
        submitted_at=now,
    )
    study = OldSweep.objects.create(
        owner=user,
        lab=lab,
        name="tune lr",
        kind="study",
        definition={**STUDY_PLAN, "spec": {"gpus": 1}},
        finished_at=now,
        stop_reason="2 trials ran",
    )
    jobs = {}
    for sweep, index, values, hours in (
        (grid, 0, {"lr": 0.1}, 1.5),
        (grid, 1, {"lr": 0.01}, 0.5),
        (study, 0, {"lr": 0.001}, 2.0),
        (study, 1, {"lr": 0.0001}, 0.25),
    ):
        job = OldJob.objects.create(
            owner=user,
            lab=lab,
            name=f"{sweep.name} #{index}",
            gpus=1,
            state="completed",
            outcome="completed",
            sweep=sweep,
            sweep_index=index,
            parameters=values,
            cluster_id=41 + index,
            proc_id=index,
            output_dir=f"/nonexistent/{sweep.pk}-{index}",
            request={"gpus": 1, "script_name": "train.py"},
            exit_code=0,
            finished_at=now,
        )
        UsageRecord.objects.create(
            job=job,
            user=user,
            lab=lab,
            started_at=now - timedelta(hours=hours + 1),
            ended_at=now - timedelta(hours=1),
            gpus=1,
            wall_s=hours * 3600,
            committed_s=hours * 3600,
            ended_by="completed",
            first_run=True,
            workstation="ws1",
        )
        jobs[(sweep.name, index)] = job.public_id
    alone = OldJob.objects.create(
        owner=user,
        lab=lab,
        name="on its own",
        gpus=0,
        state="failed",
        outcome="failed",
        cluster_id=50,
        proc_id=0,
        output_dir="/nonexistent/alone",
        exit_code=3,
        finished_at=now,
        request={"gpus": 0, "script_name": "train.py"},
    )
    content_types = apps.get_model("contenttypes", "ContentType")
    sweep_type = content_types.objects.get(app_label="jobs", model="sweep")
    apps.get_model("admin", "LogEntry").objects.create(
        user_id=user.pk,
        content_type_id=sweep_type.pk,
        object_id=str(grid.pk),
        object_repr=grid.name,
        action_flag=CHANGE,
        change_message="renamed",
    )
    return {
        "user": user.pk,
        "grid": grid.public_id,
        "study": study.public_id,
        "jobs": jobs,
        "alone": alone.public_id,
    }


@pytest.mark.django_db(transaction=True)
def test_a_database_from_before_the_split_migrates_forward_without_loss(client):
    old = fill_the_old_database(migrate(BEFORE_THE_SPLIT))
    migrate(latest())

    api = client_with_token(get_user_model().objects.get(pk=old["user"]))

    grid = api.get(reverse("api:sweep-detail", args=[old["grid"]])).json()
    assert (grid["name"], grid["kind"], grid["definition"], grid["cluster_id"]) == (
        "lr grid",
        "grid",
        {"grid": {"lr": [0.1, 0.01]}},
        41,
    )
    assert [(run["index"], run["parameters"], run["state"]) for run in grid["runs"]] == [
        (0, {"lr": 0.1}, "completed"),
        (1, {"lr": 0.01}, "completed"),
    ]
    results = api.get(reverse("api:sweep-results", args=[old["grid"]])).json()
    assert [round(run["gpu_hours"], 3) for run in results["runs"]] == [1.5, 0.5]

    study = api.get(reverse("api:sweep-detail", args=[old["study"]])).json()
    assert (study["kind"], study["stop_reason"]) == ("study", "2 trials ran")
    assert [run["parameters"] for run in study["runs"]] == [{"lr": 0.001}, {"lr": 0.0001}]
    trials = api.get(reverse("api:sweep-results", args=[old["study"]])).json()
    assert [round(run["gpu_hours"], 3) for run in trials["runs"]] == [2.0, 0.25]

    run = api.get(reverse("api:job-detail", args=[old["jobs"][("tune lr", 1)]])).json()
    assert (run["name"], run["state"], run["lab"]) == ("tune lr #1", "completed", "Vision")
    alone = api.get(reverse("api:job-detail", args=[old["alone"]])).json()
    assert (alone["state"], alone["exit_code"]) == ("failed", 3)
    [quota] = api.get(reverse("api:me")).json()["quotas"]
    assert round(quota["gpu_hours_used"], 3) == 4.25
    listed = {sweep["id"] for sweep in api.get(reverse("api:sweep-list")).json()["results"]}
    assert listed == {str(old["grid"]), str(old["study"])}

    # The sweep's page, its runs' pages link back to it, and its history in the admin.
    client.force_login(get_user_model().objects.get(pk=old["user"]))
    page = client.get(reverse("jobs:sweep", args=[old["grid"]]))
    assert page.status_code == 200 and b"lr grid" in page.content
    assert Job.objects.get(public_id=old["jobs"][("lr grid", 1)]).sweep.name == "lr grid"
    moved = ContentType.objects.get_for_model(Sweep)
    assert not ContentType.objects.filter(app_label="jobs", model="sweep").exists()
    entry = LogEntry.objects.get(object_id=str(Sweep.objects.get(public_id=old["grid"]).pk))
    assert entry.content_type_id == moved.pk and entry.get_edited_object().name == "lr grid"
