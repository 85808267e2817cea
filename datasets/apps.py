from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    """Datasets: registered once, identified by their content, previewed, shared."""

    name = "datasets"
    verbose_name = "Datasets"

    def ready(self) -> None:
        from . import tasks  # noqa: F401 - registers the tasks services queue by name
