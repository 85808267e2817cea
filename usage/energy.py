"""A job's GPU energy, from the job helper's power samples (jobs/runtime/launch.py).

Each line of the helper's file gives every device's power draw at one moment. A run's energy
is each stretch between two lines at the draw its first line read, above the card's idle
draw: the kit's figure where it set one (NIGHTSHIFT_GPU_IDLE_WATTS), otherwise the lowest
draw that device showed in the run, and the figures say which. CO2e is that energy at the
site's grid intensity for the hour it was drawn (settings.GRID_INTENSITY).

The job writes the file, so every value is bounded: a hostile job can only understate or
overstate its own energy, within what its cards could draw.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

# No card draws more; a higher reading is nonsense from the job, counted as this.
MOST_WATTS_PER_DEVICE = 2000.0
MOST_DEVICES = 16
# A longer stretch between two lines means the job was not running (evicted, waiting): none
# of it counts.
LONGEST_STRETCH_S = 600.0
JOULES_PER_KWH = 3.6e6


@dataclass(frozen=True)
class PowerRow:
    """One line of the helper's file, as far as energy goes."""

    time: float
    watts: dict[str, float]  # by device
    idle_w: float | None = None
    simulated: bool = False


@dataclass(frozen=True)
class Energy:
    """A stretch of a job's GPU energy, above idle."""

    kwh: float
    co2e_kg: float | None  # None where the site set no grid intensity
    simulated: bool
    idle_estimated: bool
    measured_s: float

    def __add__(self, other: Energy) -> Energy:
        return Energy(
            kwh=self.kwh + other.kwh,
            co2e_kg=None
            if self.co2e_kg is None or other.co2e_kg is None
            else self.co2e_kg + other.co2e_kg,
            simulated=self.simulated or other.simulated,
            idle_estimated=self.idle_estimated or other.idle_estimated,
            measured_s=self.measured_s + other.measured_s,
        )


def power_row(data: object) -> PowerRow | None:
    """A line the job wrote, checked; None where it holds no power reading."""
    if not isinstance(data, dict) or not isinstance(data.get("devices"), list):
        return None
    try:
        moment = float(data["time"])
    except (KeyError, TypeError, ValueError):
        return None
    if not (math.isfinite(moment) and 0 < moment < 1e11):
        return None
    watts = {}
    for device in data["devices"][:MOST_DEVICES]:
        if not isinstance(device, dict) or "power_w" not in device:
            continue
        reading = _watts(device.get("power_w"))
        if reading is not None:
            watts[str(device.get("uuid", ""))[:100]] = reading
    if not watts:
        return None
    return PowerRow(
        time=moment,
        watts=watts,
        idle_w=_watts(data.get("idle_w")),
        simulated=data.get("simulated") is True,
    )


def _watts(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return min(float(value), MOST_WATTS_PER_DEVICE)


def energy_of_run(
    rows: Iterable[PowerRow], intensity: Callable[[datetime], float | None]
) -> Energy | None:
    """The energy above idle of one run's rows (any order); None without two rows."""
    ordered = sorted(rows, key=lambda row: row.time)
    if len(ordered) < 2:
        return None
    lowest: dict[str, float] = {}
    for row in ordered:
        for device, watts in row.watts.items():
            lowest[device] = min(watts, lowest.get(device, watts))
    joules = 0.0
    grams: float | None = 0.0
    measured = 0.0
    idle_estimated = False
    for row, following in zip(ordered, ordered[1:], strict=False):
        seconds = following.time - row.time
        if not 0 < seconds <= LONGEST_STRETCH_S:
            continue
        if row.idle_w is None:
            idle_estimated = True
        above = sum(
            max(watts - (lowest[device] if row.idle_w is None else row.idle_w), 0.0)
            for device, watts in row.watts.items()
        )
        joules += above * seconds
        measured += seconds
        per_kwh = intensity(datetime.fromtimestamp(row.time, tz=UTC))
        grams = None if grams is None or per_kwh is None else grams + above * seconds * per_kwh
    if not measured:
        return None
    return Energy(
        kwh=joules / JOULES_PER_KWH,
        co2e_kg=None if grams is None else grams / JOULES_PER_KWH / 1000,
        simulated=any(row.simulated for row in ordered),
        idle_estimated=idle_estimated,
        measured_s=measured,
    )


def energy_text(kwh: float | None, co2e_kg: float | None = None) -> str:
    """0.42 Wh; 0.042 kWh (9.8 g CO2e); 312 kWh (73 kg CO2e)."""
    if kwh is None:
        return "not measured"
    if kwh < 0.001:
        text = f"{kwh * 1000:.2g} Wh"
    else:
        text = f"{kwh:.3g} kWh" if kwh < 100 else f"{kwh:,.0f} kWh"
    if co2e_kg is None:
        return text
    grams = co2e_kg * 1000
    if grams < 10:
        carbon = f"{grams:.2g} g"
    elif grams < 1000:
        carbon = f"{grams:.0f} g"
    else:
        carbon = f"{co2e_kg:,.3g} kg" if co2e_kg < 100 else f"{co2e_kg:,.0f} kg"
    return f"{text} ({carbon} CO2e)"
