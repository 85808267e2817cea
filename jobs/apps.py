from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Training jobs"

    def ready(self) -> None:
        from . import tasks  # noqa: F401 - registers the Celery tasks by name
