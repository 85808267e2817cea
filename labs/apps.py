from django.apps import AppConfig


class LabsConfig(AppConfig):
    name = "labs"
    verbose_name = "Labs and quotas"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from .roles import ensure_role_groups

        post_migrate.connect(ensure_role_groups, sender=self)
