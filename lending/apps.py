from django.apps import AppConfig


class LendingConfig(AppConfig):
    name = "lending"
    verbose_name = "Lending workstations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from jobs.services import eviction_cause_register

        from .selectors import reclaim_cause

        # A job's timeline says a workstation's owner asked for it back, not merely that it
        # was reclaimed.
        eviction_cause_register(reclaim_cause)
