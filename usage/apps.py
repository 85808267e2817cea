from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "usage"
    verbose_name = "What jobs use"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import tasks  # noqa: F401 - registers the Celery tasks by name
