"""A template's parameter form: what a lead may define, and what a student's values become.
Hostile values are refused by type and bounds, or reach the job as one argument or one
environment value each, never as words of a command."""

import math

import pytest

from job_templates.parameters import (
    ParameterError,
    parameters_from_json,
    parameters_parse,
    parameters_to_json,
    values_delivery,
    values_parse,
)

FORM = [
    {"name": "epochs", "type": "integer", "default": 3, "min": 1, "max": 20},
    {
        "name": "learning_rate",
        "type": "number",
        "default": 0.001,
        "min": 1e-7,
        "max": 1,
        "argument": "--lr",
    },
    {
        "name": "optimizer",
        "type": "choice",
        "choices": ["adam", "sgd"],
        "default": "adam",
        "environment": "OPTIMIZER",
    },
    {"name": "augment", "type": "boolean"},
    {"name": "note", "type": "text", "max_length": 40, "required": False},
    {"name": "dataset", "type": "dataset", "argument": "--data"},
]


def form():
    return parameters_parse(FORM)


def refused_definition(*items) -> str:
    with pytest.raises(ParameterError) as caught:
        parameters_parse(list(items))
    return caught.value.message


def refused_value(**given) -> ParameterError:
    with pytest.raises(ParameterError) as caught:
        values_parse(form(), {"dataset": "reviews", **given}, datasets={"reviews"})
    return caught.value


def test_the_defaults_fill_what_the_student_leaves_out():
    values = values_parse(form(), {"dataset": "reviews"}, datasets={"reviews"})
    assert values == {
        "epochs": 3,
        "learning_rate": 0.001,
        "optimizer": "adam",
        "augment": False,
        "dataset": "reviews",
    }


def test_text_from_a_form_or_the_cli_is_typed():
    values = values_parse(
        form(),
        {
            "epochs": "7",
            "learning_rate": "2e-5",
            "augment": "yes",
            "dataset": "reviews",
            "note": "first try",
        },
        datasets={"reviews"},
    )
    assert values["epochs"] == 7 and values["learning_rate"] == 2e-5
    assert values["augment"] is True and values["note"] == "first try"


def test_values_reach_the_job_as_arguments_and_environment_values_only():
    values = values_parse(
        form(), {"epochs": 5, "augment": True, "dataset": "reviews"}, datasets={"reviews"}
    )
    delivery = values_delivery(form(), values)
    assert delivery.arguments == [
        "--epochs=5",
        "--lr=0.001",
        "--augment",
        "--data=datasets/reviews",
    ]
    assert delivery.environment == {"OPTIMIZER": "adam"}
    assert delivery.datasets == ["reviews"]


def test_a_false_boolean_adds_no_flag_and_an_optional_value_left_out_adds_nothing():
    delivery = values_delivery(
        form(), values_parse(form(), {"dataset": "reviews"}, datasets={"reviews"})
    )
    assert "--augment" not in delivery.arguments
    assert not any(argument.startswith("--note") for argument in delivery.arguments)


@pytest.mark.parametrize("epochs", ["0", "21", "3.5", "three", "1e400", "nan", True, 2.5])
def test_an_integer_out_of_bounds_or_not_whole_is_refused_by_name(epochs):
    error = refused_value(epochs=epochs)
    assert error.field == "epochs"


@pytest.mark.parametrize("rate", ["inf", "-inf", "nan", "2", "0", math.inf])
def test_a_number_must_be_finite_and_inside_its_bounds(rate):
    assert refused_value(learning_rate=rate).field == "learning_rate"


def test_a_choice_must_be_one_of_the_choices():
    error = refused_value(optimizer="adam; rm -rf /")
    assert error.field == "optimizer" and "must be one of adam, sgd" in error.message


@pytest.mark.parametrize("note", ["line\nbreak", "tab\there", "nul\x00", "x" * 41, "a\u2028b"])
def test_text_is_one_line_of_bounded_length(note):
    assert refused_value(note=note).field == "note"


def test_shell_and_submit_file_syntax_in_text_stays_one_argument():
    hostile = "$(touch /tmp/pwned) `id` ; queue 5 \"'"
    values = values_parse(form(), {"note": hostile, "dataset": "reviews"}, datasets={"reviews"})
    delivery = values_delivery(form(), values)
    assert f"--note={hostile}" in delivery.arguments


def test_a_value_that_looks_like_a_flag_stays_the_parameters_value():
    values = values_parse(
        form(), {"note": "--epochs=999", "dataset": "reviews"}, datasets={"reviews"}
    )
    assert values_delivery(form(), values).arguments[0] == "--epochs=3"
    assert "--note=--epochs=999" in values_delivery(form(), values).arguments


def test_a_dataset_must_be_one_the_student_may_use():
    error = refused_value(dataset="../../etc")
    assert error.field == "dataset" and "not a dataset you may use" in error.message


def test_an_unknown_parameter_is_refused_and_the_known_ones_are_listed():
    error = refused_value(batch_size="64")
    assert "no parameter 'batch_size'" in error.message and "epochs" in error.message


def test_a_needed_value_left_out_is_refused():
    with pytest.raises(ParameterError, match="this is needed"):
        values_parse(form(), {}, datasets={"reviews"})


def test_the_definition_survives_storage():
    assert parameters_from_json(parameters_to_json(form())) == form()


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"name": "Epochs", "type": "integer"}, "lower-case letters"),
        ({"name": "epochs", "type": "float"}, "type must be one of"),
        ({"name": "epochs", "type": "integer", "min": 5, "max": 1}, "min is above max"),
        ({"name": "epochs", "type": "integer", "default": 50, "max": 20}, "default is refused"),
        ({"name": "epochs", "type": "integer", "min": 0.5}, "whole number"),
        ({"name": "rate", "type": "number", "max": float("nan")}, "must be a number"),
        ({"name": "epochs", "type": "integer", "argument": "--epochs; rm -rf ~"}, "flag such as"),
        ({"name": "epochs", "type": "integer", "argument": "epochs"}, "flag such as"),
        ({"name": "epochs", "type": "integer", "environment": "LD_PRELOAD"}, "set by Nightshift"),
        ({"name": "epochs", "type": "integer", "environment": "NIGHTSHIFT_SEED"}, "set by"),
        ({"name": "epochs", "type": "integer", "environment": "A B"}, "variable name"),
        ({"name": "x", "type": "choice", "choices": []}, "choices must be a list"),
        ({"name": "x", "type": "choice", "choices": ["a\nb"]}, "one line"),
        ({"name": "x", "type": "choice", "choices": ["a", "a"]}, "listed twice"),
        ({"name": "x", "type": "text", "max_length": 10_000}, "max_length must be"),
        ({"name": "x", "type": "dataset", "default": "reviews"}, "has no default"),
        ({"name": "x", "type": "text", "label": "two\nlines"}, "one line"),
        ({"name": "x", "type": "text", "script": "evil"}, "unknown key 'script'"),
        ({"name": "x", "type": "text", "argument": "--x", "environment": "X"}, "not both"),
        ({"name": "run_name", "type": "text"}, "the run form uses that name"),
    ],
)
def test_a_bad_definition_is_refused_with_the_reason(item, message):
    assert message in refused_definition(item)


def test_two_parameters_may_not_share_a_name_or_a_way_in():
    assert "defined twice" in refused_definition(
        {"name": "a", "type": "text"}, {"name": "a", "type": "text"}
    )
    first = {"name": "a", "type": "text", "argument": "--x"}
    assert "also --x" in refused_definition(first, {**first, "name": "b"})


def test_a_definition_is_a_bounded_list_of_objects():
    with pytest.raises(ParameterError, match="JSON list"):
        parameters_parse({"name": "epochs"})
    with pytest.raises(ParameterError, match="at most 20"):
        parameters_parse([{"name": f"p{i}", "type": "text"} for i in range(21)])
