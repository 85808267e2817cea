"""jobs.parameters: the runs a sweep describes, and their substitution into a job."""

import pytest

from experiments.parameters import (
    ParameterError,
    grid,
    listed,
    placeholders,
    random_samples,
    substitute,
)


def test_a_3_by_2_grid_is_every_combination_with_the_first_parameter_slowest():
    runs = grid({"lr": [0.1, 0.01, 0.001], "batch": [32, 64]}, limit=100)
    assert runs == [
        {"lr": 0.1, "batch": 32},
        {"lr": 0.1, "batch": 64},
        {"lr": 0.01, "batch": 32},
        {"lr": 0.01, "batch": 64},
        {"lr": 0.001, "batch": 32},
        {"lr": 0.001, "batch": 64},
    ]


def test_a_grid_over_the_limit_is_refused_before_it_is_expanded():
    with pytest.raises(ParameterError, match="1,000,000 runs; at most 1,000"):
        grid({"a": list(range(1000)), "b": list(range(1000))}, limit=1000)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({}, "at least one parameter"),
        ({"lr": []}, "lr has no values"),
        ({"lr": "0.1"}, "give a list"),
        ({"1lr": [1]}, "not a parameter name"),
        ({"lr-rate": [1]}, "not a parameter name"),
        ({"lr": [True]}, "not a number or text"),
        ({"lr": [float("nan")]}, "not a finite number"),
        ({"lr": [{"x": 1}]}, "not a number or text"),
        ({"tag": ["x" * 201]}, "at most 200 characters"),
    ],
)
def test_a_bad_grid_is_explained(bad, message):
    with pytest.raises(ParameterError, match=message):
        grid(bad, limit=100)


def test_listed_sets_keep_their_order_and_must_name_the_same_parameters():
    rows = [{"system": "bert", "data": "squad"}, {"data": "glue", "system": "t5"}]
    assert listed(rows, limit=10) == [
        {"system": "bert", "data": "squad"},
        {"system": "t5", "data": "glue"},
    ]
    with pytest.raises(ParameterError, match="Row 2 names other parameters"):
        listed([{"a": 1}, {"b": 2}], limit=10)
    with pytest.raises(ParameterError, match="no runs"):
        listed([], limit=10)


def test_random_samples_are_reproducible_from_their_seed_and_stay_in_range():
    distributions = {
        "lr": {"kind": "log_uniform", "low": 1e-5, "high": 1e-1},
        "dropout": {"kind": "uniform", "low": 0.0, "high": 0.5},
        "layers": {"kind": "int_uniform", "low": 2, "high": 8},
        "optimizer": {"kind": "choice", "choices": ["adam", "sgd"]},
    }
    first = random_samples(distributions, count=50, seed=7, limit=100)
    assert first == random_samples(distributions, count=50, seed=7, limit=100)
    assert first != random_samples(distributions, count=50, seed=8, limit=100)
    assert all(1e-5 <= run["lr"] <= 1e-1 for run in first)
    assert all(0 <= run["dropout"] <= 0.5 for run in first)
    assert {run["layers"] for run in first} <= set(range(2, 9))
    assert {run["optimizer"] for run in first} == {"adam", "sgd"}
    # log-uniform: as many samples below 1e-3 as above, roughly, unlike a uniform draw
    assert 10 < sum(run["lr"] < 1e-3 for run in first) < 40


@pytest.mark.parametrize(
    "distribution, message",
    [
        ({"kind": "log_uniform", "low": 0, "high": 1}, "above 0"),
        ({"kind": "uniform", "low": 2, "high": 1}, "low must be below high"),
        ({"kind": "uniform", "low": "a", "high": 1}, "must be numbers"),
        ({"kind": "gaussian", "low": 0, "high": 1}, "the kind is"),
        ({"kind": "choice", "choices": []}, "list of choices"),
        ({"kind": "int_uniform", "low": 0.5, "high": 3}, "whole bounds"),
    ],
)
def test_a_bad_distribution_is_explained(distribution, message):
    with pytest.raises(ParameterError, match=message):
        random_samples({"x": distribution}, count=3, seed=1, limit=10)


def test_substitution_writes_values_as_text_and_keeps_escaped_braces():
    values = {"lr": 0.001, "layers": 4, "name": "run a"}
    assert substitute("--lr={lr}", values) == "--lr=0.001"
    assert substitute("{layers}x{layers}", values) == "4x4"
    assert substitute("{{lr}} {name}", values) == "{lr} run a"


def test_only_plain_names_are_placeholders():
    assert placeholders("--lr {lr} --b {batch} {{literal}}") == {"lr", "batch"}
    for bad in ("{lr.__class__}", "{lr!r}", "{lr:>10}", "{0}", "{", "a}b", "{ lr }"):
        with pytest.raises(ParameterError):
            placeholders(bad)
    with pytest.raises(ParameterError, match="names no parameter"):
        substitute("{missing}", {"lr": 1})
