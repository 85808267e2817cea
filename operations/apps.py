from django.apps import AppConfig


class OperationsConfig(AppConfig):
    """What campus IT runs the portal with: maintenance drains, metrics, the pool doctor,
    drift repair and output purges."""

    name = "operations"
    verbose_name = "Operations"

    def ready(self) -> None:
        from jobs.services import admission_register

        from .drain import submissions_paused

        admission_register(paused=submissions_paused)
