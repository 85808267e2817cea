"""Sweep parameters: the parameter sets a sweep runs, and their substitution into a job.

Pure functions, without Django: a grid (the cartesian product of value lists), an explicit
list of parameter sets, or N random samples from ranges, reproducible from a seed. Values
are numbers or short text; they reach a job only through `{name}` placeholders in its
arguments and environment values, which then go through the same checks and quoting as
any job's.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
# `{name}` is a parameter; `{{` and `}}` are literal braces; any other brace is an error.
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
MAX_VALUE_LENGTH = 200
MAX_PARAMETERS = 20
MAX_VALUES = 1000

Value = int | float | str


class ParameterError(ValueError):
    """A sweep definition that cannot be run; the message says why, `field` where."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ParameterError(
            "parameters",
            f"{name!r} is not a parameter name: use letters, digits and _ (up to 40), "
            "starting with a letter.",
        )
    return name


def _check_value(name: str, value: object) -> Value:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ParameterError("parameters", f"{name}: {value!r} is not a number or text.")
    if isinstance(value, float) and not math.isfinite(value):
        raise ParameterError("parameters", f"{name}: {value!r} is not a finite number.")
    if isinstance(value, str) and len(value) > MAX_VALUE_LENGTH:
        raise ParameterError(
            "parameters", f"{name}: values are at most {MAX_VALUE_LENGTH} characters."
        )
    return value


def _check_count(runs: int, limit: int) -> None:
    if runs == 0:
        raise ParameterError("parameters", "The sweep has no runs.")
    if runs > limit:
        raise ParameterError(
            "parameters", f"The sweep has {runs:,} runs; at most {limit:,} are allowed."
        )


def grid(values: Mapping[str, Iterable[object]], *, limit: int) -> list[dict[str, Value]]:
    """Every combination of the values, the first parameter varying slowest."""
    if not values:
        raise ParameterError("parameters", "Give at least one parameter and its values.")
    if len(values) > MAX_PARAMETERS:
        raise ParameterError("parameters", f"At most {MAX_PARAMETERS} parameters.")
    axes = []
    for name, options in values.items():
        _check_name(name)
        if isinstance(options, str | bytes) or not isinstance(options, Iterable):
            raise ParameterError("parameters", f"{name}: give a list of values.")
        options = [_check_value(name, value) for value in options]
        if not options:
            raise ParameterError("parameters", f"{name} has no values.")
        if len(options) > MAX_VALUES:
            raise ParameterError("parameters", f"{name}: at most {MAX_VALUES} values.")
        axes.append(options)
    _check_count(math.prod(len(axis) for axis in axes), limit)
    names = list(values)
    return [dict(zip(names, combination, strict=True)) for combination in itertools.product(*axes)]


def listed(rows: Iterable[Mapping[str, object]], *, limit: int) -> list[dict[str, Value]]:
    """Parameter sets given one by one (typed rows or a CSV); all name the same parameters."""
    runs = []
    names: list[str] | None = None
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping):
            raise ParameterError("parameters", f"Row {number} is not a set of parameters.")
        if names is None:
            names = [_check_name(name) for name in row]
            if not names:
                raise ParameterError("parameters", "Row 1 names no parameters.")
            if len(names) > MAX_PARAMETERS:
                raise ParameterError("parameters", f"At most {MAX_PARAMETERS} parameters.")
        elif sorted(row) != sorted(names):
            raise ParameterError(
                "parameters",
                f"Row {number} names other parameters than row 1 ({', '.join(names)}).",
            )
        runs.append({name: _check_value(name, row[name]) for name in names})
        if len(runs) > limit:
            _check_count(len(runs), limit)
    _check_count(len(runs), limit)
    return runs


@dataclass(frozen=True)
class Distribution:
    """Where one parameter's random samples come from."""

    kind: str  # "uniform", "log_uniform", "int_uniform" or "choice"
    low: float | None = None
    high: float | None = None
    choices: tuple[Value, ...] = ()

    @classmethod
    def from_json(cls, name: str, data: object) -> Distribution:
        if not isinstance(data, Mapping):
            raise ParameterError("parameters", f"{name}: describe its distribution.")
        kind = data.get("kind")
        if kind == "choice":
            choices = data.get("choices")
            if isinstance(choices, str) or not isinstance(choices, list) or not choices:
                raise ParameterError("parameters", f"{name}: a choice needs a list of choices.")
            return cls("choice", choices=tuple(_check_value(name, c) for c in choices))
        if kind not in ("uniform", "log_uniform", "int_uniform"):
            raise ParameterError(
                "parameters",
                f"{name}: the kind is uniform, log_uniform, int_uniform or choice.",
            )
        low, high = data.get("low"), data.get("high")
        for bound in (low, high):
            if isinstance(bound, bool) or not isinstance(bound, int | float):
                raise ParameterError("parameters", f"{name}: low and high must be numbers.")
            if not math.isfinite(bound):
                raise ParameterError("parameters", f"{name}: low and high must be finite.")
        if not low < high:
            raise ParameterError("parameters", f"{name}: low must be below high.")
        if kind == "log_uniform" and low <= 0:
            raise ParameterError("parameters", f"{name}: a log-uniform range must be above 0.")
        if kind == "int_uniform" and (low != int(low) or high != int(high)):
            raise ParameterError("parameters", f"{name}: an integer range needs whole bounds.")
        return cls(kind, float(low), float(high))

    def sample(self, rng: random.Random) -> Value:
        if self.kind == "choice":
            return rng.choice(self.choices)
        if self.kind == "int_uniform":
            return rng.randint(int(self.low), int(self.high))
        if self.kind == "log_uniform":
            return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return rng.uniform(self.low, self.high)


def random_samples(
    distributions: Mapping[str, object], *, count: int, seed: int, limit: int
) -> list[dict[str, Value]]:
    """`count` parameter sets drawn from the distributions; the same seed, the same sets."""
    if not distributions:
        raise ParameterError("parameters", "Give at least one parameter and its range.")
    if len(distributions) > MAX_PARAMETERS:
        raise ParameterError("parameters", f"At most {MAX_PARAMETERS} parameters.")
    if isinstance(count, bool) or not isinstance(count, int):
        raise ParameterError("count", "The number of samples must be a whole number.")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ParameterError("seed", "The seed must be a whole number from 0 to 2^63 - 1.")
    _check_count(count, limit)
    parsed = {
        _check_name(name): Distribution.from_json(name, data)
        for name, data in distributions.items()
    }
    rng = random.Random(seed)  # noqa: S311 (sampling, not secrets)
    return [{name: d.sample(rng) for name, d in parsed.items()} for _ in range(count)]


def text_of(value: Value) -> str:
    """How a value is written into an argument: floats as their shortest exact form."""
    return repr(value) if isinstance(value, float) else str(value)


def placeholders(template: str) -> set[str]:
    """The parameter names `template` refers to; ParameterError for a malformed brace."""
    names = set()
    for match in _PLACEHOLDER.finditer(template):
        text = match.group()
        if text in ("{{", "}}"):
            continue
        name = match.group(1)
        if name is None or not NAME.fullmatch(name):
            raise ParameterError(
                "arguments",
                f"{text!r} in {template!r} is not a parameter: write {{name}}, or {{{{ and "
                "}} for literal braces.",
            )
        names.add(name)
    return names


def substitute(template: str, parameters: Mapping[str, Value]) -> str:
    """`template` with each `{name}` replaced by the parameter's value, as plain text."""

    def replace(match: re.Match) -> str:
        text = match.group()
        if text in ("{{", "}}"):
            return text[0]
        name = match.group(1)
        if name is None or name not in parameters:
            raise ParameterError("arguments", f"{text!r} names no parameter of this sweep.")
        return text_of(parameters[name])

    return _PLACEHOLDER.sub(replace, template)
