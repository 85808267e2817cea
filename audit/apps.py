from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit log"

    def ready(self) -> None:
        from . import signals  # noqa: F401 - records sign-ins and failed sign-ins
