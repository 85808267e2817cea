"""A template's parameter form: the lead's definition of typed, bounded fields, and the
values a student fills in, checked and turned into the job's arguments and environment.

Nothing here knows Django: the definition is JSON as the lead wrote it, the values are what
a form, the API or the CLI sent (`--param epochs=3` arrives as the string "3"). A value
reaches the job only as one argument or one environment value, which the job's own checks
and HTCondor's quoting handle as they handle every job's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from typing import Any

TYPES = ("integer", "number", "choice", "boolean", "text", "dataset")
MAX_PARAMETERS = 20
# The run form's own fields, beside the parameters.
FORM_FIELDS = frozenset({"run_name", "lab"})
KEYS = frozenset(
    {
        "name",
        "type",
        "label",
        "help",
        "default",
        "min",
        "max",
        "choices",
        "max_length",
        "argument",
        "environment",
        "required",
    }
)
MAX_CHOICES = 50
MAX_TEXT_LENGTH = 500
NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
FLAG = re.compile(r"--?[A-Za-z][A-Za-z0-9_-]{0,63}")
VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# Set by Nightshift or the launcher: a parameter may not take them over.
RESERVED_VARIABLES = frozenset(
    {
        "PYTHONPATH",
        "PYTHONUNBUFFERED",
        "PATH",
        "HOME",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "PYTHONHOME",
    }
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", ""}


class ParameterError(ValueError):
    """A definition or a value refused; `field` is the parameter's name ("parameters" for
    the definition as a whole)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str
    label: str
    help: str = ""
    default: Any = None
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    max_length: int = 100
    # How the value reaches the job: an argument pair (--epochs 3; a boolean is the flag
    # alone, when true) or an environment value. Neither given: --NAME.
    argument: str | None = None
    environment: str | None = None
    required: bool = True

    @property
    def delivery(self) -> str:
        """How the job sees it, for the form's help: `--epochs 3`, or `$OPTIMIZER`."""
        return f"${self.environment}" if self.environment else f"{self.argument}"


def _text(raw: dict, key: str, where: str, *, limit: int, default: str = "") -> str:
    value = raw.get(key, default)
    if value is None:
        value = default
    if not isinstance(value, str):
        raise ParameterError("parameters", f"{where}: {key} must be text.")
    if _CONTROL.search(value) or len(value) > limit:
        raise ParameterError(
            "parameters", f"{where}: {key} must be one line of at most {limit} characters."
        )
    return value.strip()


def _bound(raw: dict, key: str, where: str, kind: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ParameterError("parameters", f"{where}: {key} must be a number.")
    if kind == "integer" and value != int(value):
        raise ParameterError("parameters", f"{where}: {key} must be a whole number.")
    return int(value) if kind == "integer" else float(value)


def parameters_parse(raw: Any) -> list[Parameter]:
    """The lead's definition (a JSON list of objects), checked whole: names, types, bounds,
    choices, defaults inside their bounds, and each value's way into the job."""
    if raw in (None, ""):
        return []
    if not isinstance(raw, list):
        raise ParameterError("parameters", "Write the parameters as a JSON list of objects.")
    if len(raw) > MAX_PARAMETERS:
        raise ParameterError("parameters", f"A template has at most {MAX_PARAMETERS} parameters.")
    parsed: list[Parameter] = []
    names: set[str] = set()
    deliveries: set[str] = set()
    for position, item in enumerate(raw, start=1):
        if not isinstance(item, dict):
            raise ParameterError("parameters", f"Parameter {position} must be an object.")
        name = item.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ParameterError(
                "parameters",
                f"Parameter {position}: its name must be lower-case letters, "
                "digits and _, starting with a letter (at most 40).",
            )
        where = f"Parameter {name}"
        if name in FORM_FIELDS:
            raise ParameterError(
                "parameters", f"{where}: the run form uses that name; choose another."
            )
        if name in names:
            raise ParameterError("parameters", f"{where} is defined twice.")
        names.add(name)
        unknown = set(item) - KEYS
        if unknown:
            raise ParameterError("parameters", f"{where}: unknown key {sorted(unknown)[0]!r}.")
        kind = item.get("type")
        if kind not in TYPES:
            raise ParameterError("parameters", f"{where}: type must be one of {', '.join(TYPES)}.")
        label = _text(item, "label", where, limit=80) or name.replace("_", " ").capitalize()
        help_text = _text(item, "help", where, limit=300)
        argument = item.get("argument")
        environment = item.get("environment")
        if argument is not None and environment is not None:
            raise ParameterError(
                "parameters", f"{where}: give an argument or an environment variable, not both."
            )
        if environment is not None:
            if not isinstance(environment, str) or not VARIABLE.fullmatch(environment):
                raise ParameterError(
                    "parameters",
                    f"{where}: environment must be a variable name (letters, digits, _).",
                )
            if environment.startswith("NIGHTSHIFT_") or environment in RESERVED_VARIABLES:
                raise ParameterError(
                    "parameters",
                    f"{where}: {environment} is set by Nightshift; choose another name.",
                )
            delivery = f"${environment}"
        else:
            argument = f"--{name.replace('_', '-')}" if argument is None else argument
            if not isinstance(argument, str) or not FLAG.fullmatch(argument):
                raise ParameterError(
                    "parameters",
                    f"{where}: argument must be a flag such as "
                    "--epochs (letters, digits, - and _).",
                )
            delivery = argument
        if delivery in deliveries:
            raise ParameterError("parameters", f"{where}: another parameter is also {delivery}.")
        deliveries.add(delivery)
        required = item.get("required", True)
        if not isinstance(required, bool):
            raise ParameterError("parameters", f"{where}: required must be true or false.")
        low, high = _bound(item, "min", where, kind), _bound(item, "max", where, kind)
        if (low is not None or high is not None) and kind not in ("integer", "number"):
            raise ParameterError("parameters", f"{where}: min and max are for numbers.")
        if low is not None and high is not None and low > high:
            raise ParameterError("parameters", f"{where}: min is above max.")
        choices: tuple[str, ...] = ()
        if kind == "choice":
            given = item.get("choices")
            if not isinstance(given, list) or not given or len(given) > MAX_CHOICES:
                raise ParameterError(
                    "parameters", f"{where}: choices must be a list of 1 to {MAX_CHOICES} values."
                )
            for choice in given:
                if (
                    not isinstance(choice, str)
                    or not choice.strip()
                    or len(choice) > 100
                    or _CONTROL.search(choice)
                ):
                    raise ParameterError(
                        "parameters",
                        f"{where}: each choice must be one line of 1 to 100 characters.",
                    )
            if len(set(given)) != len(given):
                raise ParameterError("parameters", f"{where}: a choice is listed twice.")
            choices = tuple(given)
        elif "choices" in item:
            raise ParameterError("parameters", f"{where}: choices are for the choice type.")
        max_length = item.get("max_length", 100)
        if kind == "text" and (
            isinstance(max_length, bool)
            or not isinstance(max_length, int)
            or not 1 <= max_length <= MAX_TEXT_LENGTH
        ):
            raise ParameterError(
                "parameters", f"{where}: max_length must be 1 to {MAX_TEXT_LENGTH}."
            )
        parameter = Parameter(
            name=name,
            type=kind,
            label=label,
            help=help_text,
            min=low,
            max=high,
            choices=choices,
            max_length=max_length if kind == "text" else 100,
            argument=None if environment is not None else argument,
            environment=environment,
            required=required,
        )
        default = item.get("default")
        if default is not None:
            if kind == "dataset":
                raise ParameterError(
                    "parameters",
                    f"{where}: a dataset has no default; the student chooses one of theirs.",
                )
            try:
                default = value_parse(parameter, default, datasets=())
            except ParameterError as exc:
                raise ParameterError(
                    "parameters", f"{where}: the default is refused: {exc.message}"
                ) from None
        elif kind == "boolean":
            default = False
        parsed.append(Parameter(**{**asdict(parameter), "choices": choices, "default": default}))
    return parsed


def parameters_to_json(parameters: list[Parameter]) -> list[dict]:
    """The definition as stored and served: every key explicit."""
    stored = []
    for parameter in parameters:
        record = asdict(parameter)
        record["choices"] = list(parameter.choices)
        stored.append(record)
    return stored


def parameters_from_json(stored: list[dict]) -> list[Parameter]:
    return [
        Parameter(**{**record, "choices": tuple(record.get("choices") or ())})
        for record in stored or []
    ]


def _describe_range(parameter: Parameter) -> str:
    if parameter.min is not None and parameter.max is not None:
        return f"from {parameter.min:g} to {parameter.max:g}"
    if parameter.min is not None:
        return f"at least {parameter.min:g}"
    return f"at most {parameter.max:g}"


def value_parse(parameter: Parameter, value: Any, *, datasets: Collection[str]) -> Any:
    """One value, typed and inside its bounds; text from a form or the CLI is converted."""
    kind = parameter.type
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ParameterError(parameter.name, f"{parameter.label}: say true or false.")
    if kind in ("integer", "number"):
        if isinstance(value, bool):
            raise ParameterError(parameter.name, f"{parameter.label}: give a number.")
        if isinstance(value, str):
            text = value.strip()
            try:
                value = int(text) if kind == "integer" else float(text)
            except ValueError:
                whole = "a whole number" if kind == "integer" else "a number"
                raise ParameterError(
                    parameter.name, f"{parameter.label}: give {whole}, not {text[:40]!r}."
                ) from None
        if kind == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)
        if kind == "integer" and not isinstance(value, int):
            raise ParameterError(parameter.name, f"{parameter.label}: give a whole number.")
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise ParameterError(parameter.name, f"{parameter.label}: give a finite number.")
        if (parameter.min is not None and value < parameter.min) or (
            parameter.max is not None and value > parameter.max
        ):
            raise ParameterError(
                parameter.name,
                f"{parameter.label} must be {_describe_range(parameter)}; {value:g} is not.",
            )
        return int(value) if kind == "integer" else float(value)
    if not isinstance(value, str):
        raise ParameterError(parameter.name, f"{parameter.label}: give text.")
    if kind == "choice":
        if value not in parameter.choices:
            raise ParameterError(
                parameter.name,
                f"{parameter.label} must be one of "
                f"{', '.join(parameter.choices)}; {value[:40]!r} is not.",
            )
        return value
    if kind == "dataset":
        if value not in datasets:
            raise ParameterError(
                parameter.name, f"{parameter.label}: {value[:80]!r} is not a dataset you may use."
            )
        return value
    if _CONTROL.search(value):
        raise ParameterError(
            parameter.name, f"{parameter.label}: one line, with no control characters."
        )
    if len(value) > parameter.max_length:
        raise ParameterError(
            parameter.name, f"{parameter.label}: at most {parameter.max_length} characters."
        )
    return value


def values_parse(
    parameters: list[Parameter], given: Mapping[str, Any], *, datasets: Collection[str] = ()
) -> dict[str, Any]:
    """Every parameter's value: the one given, else its default; unknown names, missing
    required values and values out of bounds are refused, the first by its name."""
    known = {parameter.name for parameter in parameters}
    for name in given:
        if name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise ParameterError(
                str(name)[:40],
                f"This template has no parameter {str(name)[:40]!r}; it has {listed}.",
            )
    values: dict[str, Any] = {}
    for parameter in parameters:
        value = given.get(parameter.name)
        if isinstance(value, str) and not value.strip() and parameter.type != "boolean":
            value = None
        if value is None:
            value = parameter.default
        if value is None:
            if parameter.required:
                raise ParameterError(parameter.name, f"{parameter.label}: this is needed.")
            continue  # an optional value left out reaches the job not at all
        values[parameter.name] = value_parse(parameter, value, datasets=datasets)
    return values


@dataclass(frozen=True)
class Delivery:
    arguments: list[str]
    environment: dict[str, str]
    datasets: list[str]


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def values_delivery(parameters: list[Parameter], values: Mapping[str, Any]) -> Delivery:
    """The arguments (in the definition's order), environment values and datasets that
    carry `values` into the job. A dataset's value is its folder, datasets/NAME."""
    arguments: list[str] = []
    environment: dict[str, str] = {}
    datasets: list[str] = []
    for parameter in parameters:
        if parameter.name not in values:
            continue
        value = values[parameter.name]
        if parameter.type == "dataset":
            datasets.append(value)
            value = f"datasets/{value.split('@', 1)[0]}"
        if parameter.environment:
            environment[parameter.environment] = _as_text(value)
        elif parameter.type == "boolean":
            if value:
                arguments.append(parameter.argument)
        else:
            # --flag=value keeps a value that starts with '-' from reading as another flag.
            arguments.append(f"{parameter.argument}={_as_text(value)}")
    return Delivery(arguments, environment, list(dict.fromkeys(datasets)))
