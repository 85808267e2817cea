"""Hostile text in every user-controlled value that reaches a submit description, through
the API and the web form, checked on the job ad in the real pool.

A value HTCondor could misread (a macro, an attribute line, a queue statement, unbalanced
quotes, right-to-left text) must arrive literally; a value that cannot be passed safely
(line breaks, NUL bytes, absurd lengths) is refused with an error naming the field, and
nothing is queued anywhere.
"""

import json

import classad2
import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from jobs.models import Job, JobState
from tests.conftest import client_with_token, script_upload
from tests.helpers import pool_command
from tests.pipeline import wait_for_state

MACROS_AND_SYNTAX = [
    "$(HOME)",
    "$ENV(PATH)",
    "$RANDOM_CHOICE(a,b)",
    "$$(OpSys)",
    "a$$b",
    "$$$(Arch)",
    "$",
    "$$([1+1])",
    '+Owner = "root"',
    "queue 1000",
    'it\'s "quoted"',
    "'unbalanced",
    '"unbalanced',
    "\\",
    "a;b|c&&d `id`",
    "\u202eright-to-left\u202c",
    "日本語 ñ ü",
    "x" * 2000,
]
ECHO = (
    "import json, os, sys\n"
    "print(json.dumps({'argv': sys.argv[1:], 'env': {k: os.environ.get(k) for k in "
    "('EVIL', 'HOME_LIKE')}}))\n"
)
HOSTILE_ENV = {
    "EVIL": '$(HOME) $ENV(PATH) "double" \'single\' +Owner = "root" \u202e日本',
    "HOME_LIKE": "queue 1000\\",
}


# Set by HTCondor's daemons while a job runs, on some runs and not others, by timing alone:
# a measurement of the run (CpusUsage; the GPU monitor's GPUsUsage, GPUsAverageUsage,
# GPUsMemoryUsage... arrive only once an update came while the job ran, on a slot with GPUs
# or not), and the shadow's note of file transfer on checkpoint. None is anything the job was given.
def runtime_bookkeeping(attribute: str) -> bool:
    return attribute.endswith("Usage") or attribute == "WantFTOnCheckpoint"


def job_ad(job: Job) -> classad2.ClassAd:
    """The job's ad as HTCondor keeps it, read with condor_history as an admin would."""
    done = pool_command(
        "condor_history", "-l", "-constraint", f'NightshiftJobId == "{job.public_id}"'
    )
    ads = list(classad2.parseAds(done.stdout))
    assert len(ads) == 1, f"{len(ads)} HTCondor jobs for one portal job"
    return ads[0]


@pytest.fixture
def api(transactional_db):
    return client_with_token(get_user_model().objects.create_user("mallory"))


@pytest.mark.condor
@pytest.mark.timeout(300)
def test_hostile_values_through_the_api_arrive_literally_and_set_nothing(api, live_pipeline):
    def submit(name, arguments, environment):
        response = api.post(
            reverse("api:job-list"),
            {
                "name": name,
                "script": script_upload(ECHO),
                "arguments": arguments,
                "environment": [f"{k}={v}" for k, v in environment.items()],
                "memory_gb": 0.25,
            },
            format="multipart",
        )
        assert response.status_code == 201, response.content
        return Job.objects.get(public_id=response.json()["id"])

    plain = submit("plain", ["--epochs", "2"], {"EVIL": "no", "HOME_LIKE": "no"})
    hostile = submit('evil $(HOME)\u202e +Owner = "root"', MACROS_AND_SYNTAX, HOSTILE_ENV)
    for job in (plain, hostile):
        wait_for_state(job, {JobState.COMPLETED, JobState.FAILED}, timeout=180)
        assert job.state == JobState.COMPLETED, job.events.all()

    seen = json.loads((hostile.directory / "stdout.txt").read_text())
    assert seen == {"argv": MACROS_AND_SYNTAX, "env": HOSTILE_ENV}

    plain_ad, hostile_ad = job_ad(plain), job_ad(hostile)
    # Nothing extra is set: the same attributes as a plain job, owned by the same account,
    # one job in its cluster (no "queue 1000"), and no macro expanded anywhere.
    extra = {
        name
        for name in set(hostile_ad.keys()) - set(plain_ad.keys())
        if not runtime_bookkeeping(name)
    }
    assert extra == {"MATCH_EXP_Arguments"}, extra
    # HTCondor's record of the match: the arguments as the job got them, dollars and all.
    assert "$$(OpSys) a$$b $$$(Arch) $ $$([1+1])" in hostile_ad["MATCH_EXP_Arguments"]
    assert hostile_ad["Owner"] == plain_ad["Owner"] != "root"
    assert hostile_ad["TotalSubmitProcs"] == 1
    assert hostile_ad["ProcId"] == 0
    assert "root" not in (hostile_ad.get("AcctGroupUser"), hostile_ad.get("User"))


# (field, value, what the error names): refused before anything reaches the pool.
REFUSED = [
    ("arguments", ["--tag", "two\nlines"], "arguments"),
    ("arguments", ["nul\x00byte"], "arguments"),
    ("arguments", ["x" * 5000], "arguments"),
    ("environment", ["EVIL=two\nlines"], "environment"),
    ("environment", ["EVIL=nul\x00byte"], "environment"),
    ("environment", ["BAD NAME=1"], "environment"),
    ("environment", ["$(HOME)=1"], "environment"),
    ("environment", ["X=" + "y" * 9000], "environment"),
    ("entry_command", "python train.py\nqueue 1000", "entry_command"),
    ("keep_outputs", ["../../etc"], "keep_outputs"),
    ("keep_outputs", ["/etc/passwd"], "keep_outputs"),
    ("keep_outputs", ["out\nput"], "keep_outputs"),
    ("name", "nul\x00byte", "name"),
    ("name", "x" * 300, "name"),
    ("lab", "Vision\nqueue 1000", "lab"),
    ("software_environment", "$(HOME)", "software_environment"),
    ("environment_preset", "$(HOME)", "software_environment"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("field", "value", "named"), REFUSED)
def test_values_that_cannot_pass_safely_are_refused_and_nothing_is_queued(
    fake_bridge, student, field, value, named
):
    api = client_with_token(student)
    body = {"name": "job", "script": script_upload(ECHO), field: value}
    response = api.post(reverse("api:job-list"), body, format="multipart")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert any(name.split(".")[0] == named for name in error["fields"]), error
    assert Job.objects.count() == 0
    assert fake_bridge.active_jobs() == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("arguments", "ok\x00nul"),
        ("env_value", "two\x00"),
        ("name", "a\x00b"),
        ("entry_command", "python x.py\x00"),
        ("keep_outputs", "out\x00"),
    ],
)
def test_the_web_form_refuses_nul_bytes_and_keeps_nothing(
    fake_bridge, student_client, field, value
):
    data = {
        "name": "job",
        "gpus": 0,
        "cpus": 1,
        "memory_gb": 0.25,
        "arguments": "",
        "script": script_upload(ECHO),
        field: value,
    }
    if field == "env_value":
        data["env_key"] = "EVIL"
    response = student_client.post(reverse("jobs:new"), data)
    assert response.status_code == 400  # the form again, with its error
    assert b'role="alert"' in response.content
    assert Job.objects.count() == 0
    assert fake_bridge.active_jobs() == []


# -- sweeps: the same values as parameters, through itemdata ------------------------------

SWEEP_VALUES = [
    "$(HOME)",
    "$ENV(PATH)",
    "$$(OpSys)",
    "a$$b",
    '+Owner = "root"',
    "queue 1000",
    'it\'s "quoted"',
    "'unbalanced",
    "\u202eright-to-left\u202c",
    "{braces}",
]


@pytest.mark.condor
@pytest.mark.timeout(300)
def test_hostile_parameter_values_reach_every_run_of_a_sweep_literally(api, live_pipeline):
    response = api.post(
        reverse("api:sweep-list"),
        {
            "name": "evil sweep",
            "script": script_upload(ECHO),
            "memory_gb": 0.25,
            "arguments": ["--value", "{value}", "{{value}}"],
            "environment": ["EVIL=<{value}>"],
            "parameters": json.dumps({"rows": [{"value": v} for v in SWEEP_VALUES]}),
        },
        format="multipart",
    )
    assert response.status_code == 201, response.content
    runs = list(Job.objects.filter(sweep__public_id=response.json()["id"]).order_by("sweep_index"))
    for run in runs:
        wait_for_state(run, {JobState.COMPLETED, JobState.FAILED}, timeout=240)
        assert run.state == JobState.COMPLETED, list(run.events.values_list("kind", "detail"))
    for run, value in zip(runs, SWEEP_VALUES, strict=True):
        seen = json.loads((run.directory / "stdout.txt").read_text())
        assert seen["argv"] == ["--value", value, "{value}"]
        assert seen["env"]["EVIL"] == f"<{value}>"
        ad = job_ad(run)
        assert ad["TotalSubmitProcs"] == len(SWEEP_VALUES)
        assert ad["Owner"] != "root"
    assert len({run.cluster_id for run in runs}) == 1


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["two\nlines", "nul\x00byte", "unit\x1fseparator", "x" * 201])
def test_parameter_values_that_cannot_pass_safely_refuse_the_sweep(fake_bridge, student, value):
    response = client_with_token(student).post(
        reverse("api:sweep-list"),
        {
            "name": "sweep",
            "script": script_upload(ECHO),
            "arguments": ["{value}"],
            "parameters": json.dumps({"rows": [{"value": "fine"}, {"value": value}]}),
        },
        format="multipart",
    )
    assert response.status_code == 400, response.content
    assert set(response.json()["error"]["fields"]) & {"arguments", "parameters"}
    assert Job.objects.count() == 0
    assert fake_bridge.active_jobs() == []
