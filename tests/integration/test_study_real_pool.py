"""A hyperparameter study on the real pool: its trials are jobs that beat's advances start,
tell to Optuna and replace, until it has found the optimum of a known function."""

import json

import optuna
import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from experiments import studies
from experiments.models import Sweep
from jobs.models import JobState
from tests.conftest import client_with_token, script_upload
from tests.helpers import wait_for

pytestmark = [pytest.mark.condor, pytest.mark.timeout(600)]

# A stand-in for training: its "validation loss" is (x - 2)^2, approached over three steps.
OBJECTIVE = """
import sys
import nightshift
x = float(sys.argv[2])
for step in range(3):
    nightshift.log(step=step, loss=(x - 2) ** 2 + 1 / (step + 1) - 1 / 3)
"""
TRIALS = 10


def test_a_study_finds_the_optimum_of_a_known_function(transactional_db, live_pipeline):
    api = client_with_token(get_user_model().objects.create_user("optimiser"))
    response = api.post(
        reverse("api:sweep-study"),
        {
            "name": "find x",
            "gpus": 0,
            "memory_gb": 0.25,
            "script": script_upload(OBJECTIVE),
            "arguments": ["--x", "{x}"],
            "study": json.dumps(
                {
                    "space": {"x": {"kind": "uniform", "low": -5, "high": 5}},
                    "objective": "loss",
                    "parallel": 2,
                    "max_trials": TRIALS,
                    "sampler": "tpe",
                    "pruner": "none",
                    "seed": 11,
                }
            ),
        },
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    sweep = Sweep.objects.get(public_id=response.json()["id"])

    def finished():
        sweep.refresh_from_db()
        return sweep.finished_at is not None

    wait_for(finished, timeout=540, interval=3, what=f"the study's {TRIALS} trials")
    trials = list(sweep.runs.order_by("sweep_index"))
    assert len(trials) == TRIALS
    assert {trial.state for trial in trials} == {JobState.COMPLETED}
    assert sweep.stop_reason == f"reached {TRIALS} trials"
    study = optuna.load_study(
        study_name=f"nightshift-{sweep.public_id}", storage=studies.optuna_storage()
    )
    assert {trial.state for trial in study.trials} == {optuna.trial.TrialState.COMPLETE}
    # Optuna was told each trial's last logged value; the best is near x = 2.
    best = study.best_trial
    assert best.value == pytest.approx((best.params["x"] - 2) ** 2)
    assert abs(best.params["x"] - 2) < 0.75, [t.params["x"] for t in study.trials]
    assert len(study.trials[0].intermediate_values) == 3
