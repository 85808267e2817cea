"""Typed reading of environment variables. Every bad value names its variable."""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
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
