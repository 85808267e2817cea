from django.apps import AppConfig


class AccountingConfig(AppConfig):
    name = "accounting"
    verbose_name = "Usage accounting and reports"

    def ready(self) -> None:
        from jobs.services import admission_register, run_ledger_register

        from . import quotas, tasks  # noqa: F401 - tasks registers the Celery tasks by name
        from .services import UsageLedger

        run_ledger_register(UsageLedger())
        admission_register(quota=quotas.quota_check, lock_quota=quotas.lock_quota)
