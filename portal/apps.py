from django.apps import AppConfig


class PortalConfig(AppConfig):
    """The project itself, as an app only so that its system checks are registered."""

    name = "portal"

    def ready(self) -> None:
        from . import checks  # noqa: F401 - registers the checks
