from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    """Datasets: registered once, identified by their content, previewed, shared."""

    name = "datasets"
    verbose_name = "Datasets"

    def ready(self) -> None:
        from jobs.services import data_catalogue_register
        from plumbing.panels import panel_register

        from . import quotas, tasks  # noqa: F401 - tasks: registers the tasks services queue by name
        from .delivery import CATALOGUE

        data_catalogue_register(CATALOGUE)
        panel_register("account", quotas.account_storage_panel)
        panel_register("lab", quotas.lab_storage_panel)
