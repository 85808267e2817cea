"""Sections a higher app adds to a lower app's page: the account page (accounts) and a lab's
page (accounting) show the storage the datasets app counts, without importing it.

An app registers a provider for a page from its AppConfig.ready(); the page's view asks for
its panels and includes each panel's template with the panel as `panel`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Panel:
    template: str
    context: dict = field(default_factory=dict)


_providers: dict[str, list[Callable[..., Panel | None]]] = {}


def panel_register(page: str, provider: Callable[..., Panel | None]) -> None:
    providers = _providers.setdefault(page, [])
    if provider not in providers:
        providers.append(provider)


def panels_for(page: str, **about) -> list[Panel]:
    """The panels for one showing of `page` (`about`: the user, the lab...)."""
    panels = (provider(**about) for provider in _providers.get(page, ()))
    return [panel for panel in panels if panel is not None]
