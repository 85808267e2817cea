"""Where the current request comes from, for the audit log: set once per request."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Origin:
    ip: str | None = None
    via: str = "system"
    token_prefix: str = ""


_origin: ContextVar[Origin] = ContextVar("audit_origin", default=Origin())  # noqa: B039 - frozen


def current_origin() -> Origin:
    return _origin.get()


def set_origin(origin: Origin):
    return _origin.set(origin)


def reset_origin(token) -> None:
    _origin.reset(token)


def note_token(prefix: str) -> None:
    """The request authenticated with an API token: entries it writes name the token."""
    _origin.set(replace(_origin.get(), token_prefix=prefix, via="api"))
