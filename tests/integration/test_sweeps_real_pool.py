"""A sweep from the job form, end to end on the real pool: one cluster, each run its own
arguments and folder, every run completed and its output kept."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

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
    for run in runs:
        wait_for_state(run, {JobState.COMPLETED, JobState.FAILED}, timeout=240)
        assert run.state == JobState.COMPLETED, list(run.events.values_list("kind", "detail"))
    sweep.refresh_from_db()
    assert {run.cluster_id for run in runs} == {sweep.cluster_id}
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
