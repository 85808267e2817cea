from django.apps import AppConfig


class ForecastsConfig(AppConfig):
    name = "forecasts"
    verbose_name = "Availability forecasts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from jobs.services import match_extra_register
        from plumbing.panels import panel_register

        from . import reservations, tasks  # noqa: F401 - tasks: registers the Celery tasks by name
        from .predictions import draft_start

        # The form's live answer says when a job of the request drafted would start.
        match_extra_register(draft_start)
        panel_register("lab", reservations.lab_reservations_panel)
