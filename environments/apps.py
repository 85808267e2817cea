from django.apps import AppConfig


class EnvironmentsConfig(AppConfig):
    """Software environments: requirements locked once, built once per workstation, shared."""

    name = "environments"
    verbose_name = "Software environments"

    def ready(self) -> None:
        from jobs.services import software_catalogue_register

        from .services import CATALOGUE

        software_catalogue_register(CATALOGUE)
