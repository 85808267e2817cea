"""Thin Celery tasks: they take ids, call a service, and own their retries."""

from __future__ import annotations

from celery import shared_task

from . import services


@shared_task(acks_late=True)
def import_dataset(import_pk: int) -> str:
    return services.dataset_import_run(import_pk).state


@shared_task(acks_late=True)
def recover_imports() -> dict[str, int]:
    return services.dataset_imports_recover()
