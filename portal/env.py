"""Typed reading of environment variables. Every bad value names its variable."""

from __future__ import annotations

import csv
import io
import ipaddress
import math
import os
import re
import shlex
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from urllib.parse import quote, unquote

import environ
from django.core.exceptions import ImproperlyConfigured

_env = environ.Env()
# The secret files settings were read from, for the deploy check of their permissions.
FILES_READ: list[str] = []
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str) -> str | None:
    """NAME's value, or the content of the file NAME_FILE names (for secrets kept out of the
    environment, e.g. systemd credentials or Docker secrets). Setting both is an error."""
    value = os.environ.get(name)
    path = os.environ.get(f"{name}_FILE")
    if path:
        if value is not None:
            raise ImproperlyConfigured(f"Set {name} or {name}_FILE, not both.")
        try:
            value = Path(path).read_text(encoding="utf-8")
            FILES_READ.append(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise ImproperlyConfigured(
                f"{name}_FILE names {path!r}, which cannot be read: {exc.strerror or exc}"
            ) from None
    return None if value is None else value.strip()


def env_str(name: str, default: str) -> str:
    value = _raw(name)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {value!r}")


def env_int(
    name: str, default: int | None, *, minimum: int | None = None, maximum: int | None = None
) -> int | None:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {number}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, not {number}")
    return number


def env_float(name: str, default: float | None, *, minimum: float = 0.0) -> float | None:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {value!r}") from None
    if number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum:g}, not {number:g}")
    return number


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


def env_command(name: str, default: str) -> list[str]:
    """A command and its arguments, split as a shell would split them (nothing runs one)."""
    value = env_str(name, default)
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not a command line: {exc}") from None
    if not words:
        raise ImproperlyConfigured(f"{name} must name a command")
    return words


def env_list(name: str, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_names(
    name: str, pattern: re.Pattern[str], *, allowed: list[str] | None = None, what: str = "name"
) -> list[str]:
    """A comma-separated list of distinct names, each matching `pattern` (and, given
    `allowed`, among them)."""
    names = env_list(name, [])
    for item in names:
        if not pattern.fullmatch(item):
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not a {what} (one must match {pattern.pattern})"
            )
        if allowed is not None and item not in allowed:
            raise ImproperlyConfigured(f"{name} names {item!r}, which is not among {allowed}")
    if len(set(names)) != len(names):
        raise ImproperlyConfigured(f"{name} names the same {what} twice")
    return names


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def env_networks(name: str, default: list[str]) -> list[Network]:
    """A comma-separated list of addresses or networks (10.0.0.0/8, ::1)."""
    networks = []
    for item in env_list(name, default):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not an address or a network like 10.1.0.0/16"
            ) from None
    return networks


def env_path(name: str, default: Path) -> Path:
    value = env_str(name, str(default))
    path = Path(value)
    if not path.is_absolute():
        raise ImproperlyConfigured(f"{name} must be an absolute path, not {value!r}")
    return path


def _without_password(url: str) -> str:
    """The URL as an error message may show it: any password replaced by ***."""
    return re.sub(r"^([a-z0-9+.-]+://[^:/@]*):[^@/]*@", r"\1:***@", url, flags=re.IGNORECASE)


POSTGRESQL_ENGINE = "django.db.backends.postgresql"


def development_database_url(socket_dir: Path) -> str:
    """The URL of the development cluster deploy/dev/database runs: database and user
    nightshift, through the Unix socket in `socket_dir` (a percent-encoded host)."""
    return f"postgres://nightshift@{quote(str(socket_dir), safe='')}/nightshift"


def env_database(name: str, default: str) -> dict:
    """A PostgreSQL database URL. A host that is a percent-encoded absolute path
    (postgres://user@%2Frun%2Fpostgresql/db) is a Unix socket folder. Any other engine
    is refused: every test runs on PostgreSQL, so no other engine is a tested product."""
    value = env_str(name, default)
    shown = _without_password(value)
    try:
        config = _env.db_url_config(value)
    except (environ.ImproperlyConfigured, KeyError, ValueError) as exc:
        reason = str(exc).replace(value, shown)
        raise ImproperlyConfigured(f"{name} is not a database URL ({reason}): {shown!r}") from None
    engine = str(config.get("ENGINE", ""))
    if "." not in engine:
        raise ImproperlyConfigured(f"{name} has an unknown database scheme: {shown!r}")
    if engine != POSTGRESQL_ENGINE:
        raise ImproperlyConfigured(
            f"{name} must name a PostgreSQL database (postgres://USER@HOST:PORT/NAME), "
            f"not {shown!r}: Nightshift runs on PostgreSQL only, the engine its tests run on. "
            "Leave it unset to use the development cluster `make run` starts under var/postgres/."
        )
    host = str(config.get("HOST") or "")
    if host.lower().startswith("%2f"):
        config["HOST"] = unquote(host)
    return config


def env_url_prefix(name: str, example: str) -> str:
    """An internal URL prefix ("/_jobfiles/"), or "" for none."""
    value = env_str(name, "")
    if value and not (value.startswith("/") and value.endswith("/")):
        raise ImproperlyConfigured(f"{name} must start and end with a slash, like {example}")
    return value


def env_url(name: str, default: str, *, schemes: tuple[str, ...]) -> str:
    value = env_str(name, default)
    if not value.startswith(tuple(f"{scheme}://" for scheme in schemes)):
        raise ImproperlyConfigured(
            f"{name} must be a URL starting with {' or '.join(s + '://' for s in schemes)}"
        )
    return value


_RATE = re.compile(r"^(\d+)/(second|minute|hour|day)$")


def env_rate(name: str, default: str) -> str:
    """A rate limit such as "30/minute": a count per second, minute, hour or day."""
    value = env_str(name, default)
    if not _RATE.fullmatch(value) or int(value.split("/")[0]) < 1:
        raise ImproperlyConfigured(
            f"{name} must look like 30/minute (a count per second, minute, hour or day), "
            f"not {value!r}"
        )
    return value


@dataclass(frozen=True)
class GridIntensity:
    """Grams of CO2e per kWh drawn from the grid: one figure, a typical day by hour, or an
    hourly series (a grid operator's export). A moment the series lacks takes its hour of
    the day's figure, then the file's mean."""

    figure: float | None = None
    by_hour_of_day: dict[int, float] = field(default_factory=dict)
    by_hour: dict[int, float] = field(default_factory=dict)  # hours since the epoch
    source: str = ""

    def __bool__(self) -> bool:
        return self.figure is not None

    def at(self, moment: datetime, zone: tzinfo) -> float | None:
        hour = int(moment.timestamp() // 3600)
        if hour in self.by_hour:
            return self.by_hour[hour]
        return self.by_hour_of_day.get(moment.astimezone(zone).hour, self.figure)


def env_grid_intensity(name: str, zone: tzinfo) -> GridIntensity:
    """NAME is a figure in g CO2e per kWh (233), or NAME_FILE names a CSV of two columns:
    an hour and its figure. The hour is 0 to 23 (a typical day, local time) or the ISO time
    the hour starts (naive times are local); a first line that is not numbers is a header."""
    value = _raw(name)
    if value is None or value == "":
        return GridIntensity()
    try:
        figure = float(value)
    except ValueError:
        figure = None
    if figure is not None:
        return GridIntensity(figure=_grams(name, figure), source=f"{figure:g} g CO2e/kWh")
    by_hour_of_day: dict[int, float] = {}
    by_hour: dict[int, float] = {}
    rows = [row for row in csv.reader(io.StringIO(value)) if any(cell.strip() for cell in row)]
    for number, row in enumerate(rows, start=1):
        if len(row) < 2:
            raise ImproperlyConfigured(f"{name}: line {number} needs an hour and a figure")
        hour_text, figure_text = row[0].strip(), row[1].strip()
        try:
            grams = float(figure_text)
        except ValueError:
            if number == 1:
                continue  # the header
            raise ImproperlyConfigured(
                f"{name}: line {number}: {figure_text[:40]!r} is not a figure in g CO2e/kWh"
            ) from None
        grams = _grams(f"{name}: line {number}", grams)
        if hour_text.isdigit() and int(hour_text) < 24:
            by_hour_of_day[int(hour_text)] = grams
            continue
        try:
            start = datetime.fromisoformat(hour_text)
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: line {number}: {hour_text[:40]!r} is neither an hour of the day "
                "(0 to 23) nor the ISO time an hour starts (2026-12-01T14:00+01:00)"
            ) from None
        if start.tzinfo is None:
            start = start.replace(tzinfo=zone)
        by_hour[int(start.timestamp() // 3600)] = grams
    figures = [*by_hour_of_day.values(), *by_hour.values()]
    if not figures:
        raise ImproperlyConfigured(f"{name}: the file has no figures")
    mean = sum(figures) / len(figures)
    return GridIntensity(
        figure=mean,
        by_hour_of_day=by_hour_of_day,
        by_hour=by_hour,
        source=f"by hour, {len(figures)} figures (mean {mean:.0f} g CO2e/kWh)",
    )


def _grams(what: str, grams: float) -> float:
    if not math.isfinite(grams) or not 0 <= grams <= 5000:
        raise ImproperlyConfigured(f"{what}: {grams:g} g CO2e/kWh is not between 0 and 5000")
    return grams


def env_month_days(name: str, default: str) -> list[tuple[int, int]]:
    """Days of the year as MM-DD, comma-separated (01-15,09-01): sorted (month, day) pairs."""
    days = []
    for item in env_list(name, default.split(",")):
        try:
            moment = datetime.strptime(f"2000-{item}", "%Y-%m-%d")
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not a day of the year written MM-DD (09-01)"
            ) from None
        days.append((moment.month, moment.day))
    if not days:
        raise ImproperlyConfigured(f"{name} must name at least one day (09-01)")
    return sorted(set(days))
