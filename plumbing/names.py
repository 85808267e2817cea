"""Names that several people's things share: a bare NAME, or OWNER/NAME.

Environments and datasets are unique per owner, and a user sees their own, their labs'
and the site's. Were a bare name to resolve by a fixed order, any member of a lab could
create a lab-wide "pytorch" and every other member asking for `pytorch` would run theirs
instead of the site's. So a bare name resolves to the user's own thing of that name (which
nobody else can make), or to the one thing anybody else offers under it; where several
owners offer one, the name is refused with the qualified names to choose from: OWNER/NAME,
or site/NAME for what the site's administrators keep.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from .api import ApiError

SITE = "site"


class Owned(Protocol):
    name: str
    owner_id: int | None

    @property
    def owner(self): ...


T = TypeVar("T", bound=Owned)


class AmbiguousName(LookupError):
    """More than one owner offers this bare name; `choices` are the qualified names."""

    def __init__(self, kind: str, name: str, choices: list[str]) -> None:
        self.kind, self.name, self.choices = kind, name, choices
        super().__init__(
            f"More than one {kind} called {name!r} is open to you: say which one, as "
            + " or ".join(choices)
            + "."
        )


def split_qualified(reference: str) -> tuple[str | None, str]:
    """('alice', 'pytorch') for alice/pytorch; (None, 'pytorch') for a bare name."""
    owner, slash, name = reference.partition("/")
    return (owner, name) if slash else (None, reference)


def owner_label(thing: Owned) -> str:
    return thing.owner.get_username() if thing.owner_id is not None else SITE


def qualified_name(thing: Owned) -> str:
    return f"{owner_label(thing)}/{thing.name}"


def pick_named(kind: str, matches: Sequence[T], *, user_id: int, qualifier: str | None) -> T | None:
    """The one of `matches` (all called the same, all visible to the user) that the name
    means, None for none; AmbiguousName where only a qualified name can tell."""
    if qualifier is not None:
        # The site's own (no owner) first: a user called "site" cannot take its place.
        chosen = sorted(
            (thing for thing in matches if owner_label(thing) == qualifier),
            key=lambda thing: thing.owner_id is not None,
        )
        return chosen[0] if chosen else None
    own = [thing for thing in matches if thing.owner_id == user_id]
    if own:
        return own[0]
    if len(matches) > 1:
        raise AmbiguousName(kind, matches[0].name, sorted(qualified_name(t) for t in matches))
    return matches[0] if matches else None


def needs_qualifying(things: Sequence[Owned], *, user_id: int) -> set[str]:
    """The bare names among `things` that pick_named would refuse for this user."""
    owners: dict[str, set] = {}
    for thing in things:
        owners.setdefault(thing.name, set()).add(thing.owner_id)
    return {
        name for name, owned_by in owners.items() if len(owned_by) > 1 and user_id not in owned_by
    }


def named_in_address(kind: str, find: Callable[[str], T | None], name: str, owner: str | None) -> T:
    """What an API address names (`.../NAME/`, with `?owner=USERNAME` or `?owner=site`
    where several owners offer NAME): 409 with the choices where the name alone cannot
    tell, 404 where there is none the caller may use."""
    try:
        found = find(f"{owner}/{name}" if owner else name)
    except AmbiguousName as exc:
        raise ApiError(
            f"{exc} Add ?owner=USERNAME (or ?owner=site) to the address.",
            code="ambiguous",
            status_code=409,
        ) from None
    if found is None:
        raise ApiError(
            f"No {kind} called {name[:80]!r} that you may use.", code="not_found", status_code=404
        )
    return found
