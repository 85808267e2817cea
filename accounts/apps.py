from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts and access tokens"

    def ready(self) -> None:
        from jobs.services import admission_register

        from . import ldap, schema  # noqa: F401 - LDAP group sync; the token scheme for the docs
        from .registration import user_may_submit

        admission_register(approved=user_may_submit)
