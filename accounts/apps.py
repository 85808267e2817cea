from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts and access tokens"

    def ready(self) -> None:
        from . import ldap, schema  # noqa: F401 - LDAP group sync; the token scheme for the docs
