from django.apps import AppConfig


class ForecastsConfig(AppConfig):
    name = "forecasts"
    verbose_name = "Availability forecasts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import tasks  # noqa: F401 - registers the Celery tasks by name
