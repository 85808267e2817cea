from django.apps import AppConfig


class ModelRegistryConfig(AppConfig):
    """Published models: a finished job's chosen outputs as immutable, shared versions."""

    name = "model_registry"
    verbose_name = "Models"

    def ready(self) -> None:
        from datasets.services import archive_holder_register, storage_kept_register
        from jobs.services import model_catalogue_register

        from .delivery import CATALOGUE, archives_held, storage_kept_by_lab, storage_kept_by_user

        model_catalogue_register(CATALOGUE)
        archive_holder_register(archives_held)
        storage_kept_register(by_user=storage_kept_by_user, by_lab=storage_kept_by_lab)
