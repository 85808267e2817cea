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
SEED = 3


def proposals_of_the_same_study_run_here() -> list[float]:
    """The values a study seeded alike proposes when told each loss at once: the sampler is
    made afresh for every trial, seeded with the study's seed plus the trials asked so far."""
    study = optuna.create_study()
    for asked in range(TRIALS):
        study.sampler = optuna.samplers.TPESampler(seed=SEED + asked, n_startup_trials=3)
        trial = study.ask({"x": optuna.distributions.FloatDistribution(-5, 5)})
        study.tell(trial, (trial.params["x"] - 2) ** 2)
    return [trial.params["x"] for trial in study.trials]


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
                    # One at a time, each trial is asked for after the last was told: the
                    # study's path is then the seed's alone, not the pool's timing.
                    "parallel": 1,
                    "max_trials": TRIALS,
                    "sampler": "tpe",
                    "pruner": "none",
                    "seed": SEED,
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
    # Optuna was told each trial's last logged value: had one been wrong or missing, the
    # sampler's proposals after its three random ones would differ from these.
    proposed = [trial.params["x"] for trial in study.trials]
    assert proposed == pytest.approx(proposals_of_the_same_study_run_here())
    best = study.best_trial
    assert best.value == pytest.approx((best.params["x"] - 2) ** 2)
    assert abs(best.params["x"] - 2) < 0.75, proposed
    assert len(study.trials[0].intermediate_values) == 3
