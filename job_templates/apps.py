from django.apps import AppConfig


class JobTemplatesConfig(AppConfig):
    """Job templates: a lead's working training setup, run by students through a form."""

    name = "job_templates"
    verbose_name = "Job templates"

    def ready(self) -> None:
        from datasets.services import archive_holder_register
        from plumbing.panels import panel_register

        from .selectors import projects_held
        from .views import job_panel, model_version_panel

        archive_holder_register(projects_held)
        panel_register("model_version", model_version_panel)
        panel_register("job", job_panel)
