from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts and access tokens"

    def ready(self) -> None:
        from . import schema  # noqa: F401 - registers the token scheme with drf-spectacular
