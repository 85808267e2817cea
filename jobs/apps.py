from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Training jobs"

    def ready(self) -> None:
        from . import sweeps, tasks  # noqa: F401 - registers the Celery tasks by name
        from .submission import batch_submitter_register

        batch_submitter_register(sweeps.SWEEP_SUBMITTER)
