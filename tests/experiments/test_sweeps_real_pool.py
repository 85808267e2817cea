"""A sweep from the job form, end to end on the real pool: one cluster, each run its own
arguments and folder, every run completed and its output kept."""

import re
import time

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from rest_framework.test import APIClient

from accounting.models import QuotaHold
from accounts.services import token_create
from experiments.models import Sweep
from jobs.models import JobState
from tests.conftest import script_upload
from tests.helpers import pool_command
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]

WRITES_ITS_ARGUMENTS = """
import os, sys
os.makedirs("outputs", exist_ok=True)
with open("outputs/args.txt", "w") as f:
    f.write(" ".join(sys.argv[1:]))
"""


def completed_as_one_cluster(sweep: Sweep, runs: list) -> None:
    for run in runs:
        wait_for_state(run, {JobState.COMPLETED, JobState.FAILED}, timeout=240)
        assert run.state == JobState.COMPLETED, list(run.events.values_list("kind", "detail"))
    sweep.refresh_from_db()
    assert {run.cluster_id for run in runs} == {sweep.cluster_id}


def test_a_3_by_2_grid_runs_as_six_jobs_of_one_cluster(client, transactional_db, live_pipeline):
    client.force_login(get_user_model().objects.create_user("ada", password="a-long-password-1"))
    response = client.post(
        reverse("jobs:new"),
        {
            "name": "grid",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 0.25,
            "script": script_upload(WRITES_ITS_ARGUMENTS),
            "arguments": "--lr\n{lr}\n--batch={batch}",
            "sweep_grid": "lr = 0.1, 0.01, 0.001\nbatch = 32, 64",
        },
    )
    assert response.status_code == 302, response.content[-2000:]
    sweep = Sweep.objects.get()
    runs = list(sweep.runs.order_by("sweep_index"))
    completed_as_one_cluster(sweep, runs)
    expected = [
        f"--lr {lr} --batch={batch}" for lr in ("0.1", "0.01", "0.001") for batch in (32, 64)
    ]
    assert [(run.directory / "outputs" / "args.txt").read_text() for run in runs] == expected
    # HTCondor's own count: one cluster of six procs, each with its own arguments.
    done = pool_command("condor_history", str(sweep.cluster_id), "-af:,", "ProcId", "Arguments")
    procs = sorted(
        (int(proc), args.strip())
        for proc, args in (line.split(",", 1) for line in done.stdout.strip().splitlines())
    )
    assert procs == [(proc, f"train.py {args}") for proc, args in enumerate(expected)]


def test_a_large_sweep_is_written_and_submitted_by_the_worker(
    transactional_db, live_pipeline, settings
):
    settings.SWEEP_RUNS_IN_REQUEST = 4
    user = get_user_model().objects.create_user("bo", password="a-long-password-1")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, name='t').secret}")
    response = api.post(
        reverse("api:sweep-list"),
        {
            "name": "grid",
            "memory_gb": 0.25,
            "script": script_upload(WRITES_ITS_ARGUMENTS),
            "arguments": ["--lr", "{lr}"],
            "parameters": '{"grid": {"lr": [1, 2, 3, 4, 5, 6, 7, 8]}}',
        },
        format="multipart",
    )
    assert response.status_code == 201, response.content[-2000:]
    # Answered before the worker wrote a run: this web process wrote only the sweep.
    assert (response.json()["stage"], response.json()["run_count"]) == ("writing", 0)
    sweep = Sweep.objects.get()
    deadline = time.monotonic() + 120
    while sweep.runs.count() < 8 or sweep.runs.filter(cluster_id__isnull=True).exists():
        assert time.monotonic() < deadline, (sweep.prepared_runs, sweep.last_error)
        time.sleep(0.5)
        sweep.refresh_from_db()
    runs = list(sweep.runs.order_by("sweep_index"))
    completed_as_one_cluster(sweep, runs)
    assert [(run.directory / "outputs" / "args.txt").read_text() for run in runs] == [
        f"--lr {n}" for n in range(1, 9)
    ]
    assert not QuotaHold.objects.exists()
    # HTCondor took the runs with their folders empty, and started each once it was filled.
    sweep.refresh_from_db()
    assert (sweep.ready_runs, sweep.last_error) == (8, "")
    done = pool_command(
        "condor_history",
        str(sweep.cluster_id),
        "-af",
        "NightshiftFolderReady",
        "JobMaterializeLimit",
    )
    # ... as a cluster the schedd made the jobs of itself, after taking it (late).
    assert done.stdout.splitlines() == ["true 8"] * 8
    # Each run's HTCondor log is in its own folder, about its own job only.
    for run in runs:
        log = (run.directory / "condor.log").read_text()
        jobs_named = set(re.findall(r"^\d{3} \((\d+)\.(\d+)\.\d+\)", log, re.MULTILINE))
        assert jobs_named == {(f"{sweep.cluster_id:03d}", f"{run.proc_id:03d}")}, log
