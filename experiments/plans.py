"""A sweep's plan: which parameter sets it runs, and each run's job spec."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from jobs.services import JobSpec, JobSubmissionError

from . import parameters
from .models import Sweep
from .parameters import ParameterError


@dataclass(frozen=True)
class SweepPlan:
    """Which parameter sets a sweep runs, as the user described them."""

    kind: str
    definition: dict

    @classmethod
    def from_json(cls, data: object) -> SweepPlan:
        """{"grid": {name: [values]}}, {"rows": [{name: value}]} or {"random": {name:
        distribution}, "count": N, "seed": S}."""
        if not isinstance(data, dict):
            raise JobSubmissionError("parameters", "Describe the sweep's parameters.")
        kinds = [key for key in ("grid", "rows", "random") if key in data]
        if len(kinds) != 1:
            raise JobSubmissionError(
                "parameters", "Give exactly one of grid, rows (a list of parameter sets) or random."
            )
        kind = {"grid": Sweep.Kind.GRID, "rows": Sweep.Kind.LIST, "random": Sweep.Kind.RANDOM}
        return cls(kind[kinds[0]], data)

    def runs(self, *, limit: int) -> list[dict[str, parameters.Value]]:
        data = self.definition
        try:
            if self.kind == Sweep.Kind.GRID:
                grid = data["grid"]
                if not isinstance(grid, dict):
                    raise ParameterError("parameters", "A grid maps each parameter to its values.")
                return parameters.grid(grid, limit=limit)
            if self.kind == Sweep.Kind.LIST:
                rows = data["rows"]
                if not isinstance(rows, list):
                    raise ParameterError("parameters", "Rows are a list of parameter sets.")
                return parameters.listed(rows, limit=limit)
            distributions = data["random"]
            if not isinstance(distributions, dict):
                raise ParameterError("parameters", "Map each parameter to its distribution.")
            return parameters.random_samples(
                distributions, count=data.get("count"), seed=data.get("seed"), limit=limit
            )
        except ParameterError as exc:
            raise JobSubmissionError(exc.field, exc.message) from None


def run_spec(spec: JobSpec, index: int, values: dict) -> JobSpec:
    try:
        return dataclasses.replace(
            spec,
            name=f"{spec.name} [{index}]",
            arguments=[parameters.substitute(a, values) for a in spec.arguments],
            environment={k: parameters.substitute(v, values) for k, v in spec.environment.items()},
            entry_command=(
                parameters.substitute(spec.entry_command, values)
                if spec.entry_command
                else spec.entry_command
            ),
            notify_by_email=False,
        )
    except ParameterError as exc:
        raise JobSubmissionError(exc.field, exc.message) from None


def check_placeholders(spec: JobSpec, names: set[str]) -> None:
    texts = [*spec.arguments, *spec.environment.values(), spec.entry_command or ""]
    try:
        used = set().union(*(parameters.placeholders(text) for text in texts))
    except ParameterError as exc:
        raise JobSubmissionError(exc.field, exc.message) from None
    unknown = sorted(used - names)
    if unknown:
        raise JobSubmissionError(
            "arguments",
            f"{{{unknown[0]}}} names no parameter of this sweep; its parameters are "
            f"{', '.join(sorted(names))}.",
        )
