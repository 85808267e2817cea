from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    """Datasets: registered once, identified by their content, previewed, shared."""

    name = "datasets"
    verbose_name = "Datasets"

    def ready(self) -> None:
        from jobs.inputs import data_catalogue_register

        from . import tasks  # noqa: F401 - registers the tasks services queue by name
        from .delivery import CATALOGUE

        data_catalogue_register(CATALOGUE)
