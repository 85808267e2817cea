from django.apps import AppConfig


class AccountingConfig(AppConfig):
    name = "accounting"
    verbose_name = "Usage accounting and reports"
