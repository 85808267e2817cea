from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    """Sweeps, evaluation matrices and Optuna studies: many jobs run as one experiment."""

    name = "experiments"
    verbose_name = "Experiments"

    def ready(self) -> None:
        from jobs.services import batch_submitter_register
        from jobs.web import job_form_register

        from . import sweeps, tasks  # noqa: F401 - tasks registers the Celery tasks by name
        from .views import JOB_OR_SWEEP_FORM

        batch_submitter_register(sweeps.SWEEP_SUBMITTER)
        job_form_register(JOB_OR_SWEEP_FORM)
