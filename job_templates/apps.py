from django.apps import AppConfig


class JobTemplatesConfig(AppConfig):
    """Job templates: a lead's working training setup, run by students through a form."""

    name = "job_templates"
    verbose_name = "Job templates"

    def ready(self) -> None:
        from datasets.storage import archive_holder_register
        from model_registry.views import version_action_register

        from .selectors import projects_held
        from .views import model_version_actions

        archive_holder_register(projects_held)
        version_action_register(model_version_actions)
