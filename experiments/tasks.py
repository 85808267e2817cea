"""Thin Celery tasks for experiments: they take ids, call a service, and own their retries.

They keep the names they had when they lived in jobs.tasks: messages already queued, and
beat's schedule, find them by name.
"""

from __future__ import annotations

import logging

from celery import shared_task

from jobs.services import SUBMISSION_RETRIES

from . import studies, sweeps
from .models import Sweep

logger = logging.getLogger(__name__)


@shared_task(name="jobs.tasks.submit_sweep", **SUBMISSION_RETRIES)
def submit_sweep(self, sweep_pk: int) -> None:
    try:
        sweeps.sweep_submit_to_pool(sweep_pk)
    except Sweep.DoesNotExist:
        logger.warning("sweep %s was deleted before it could be submitted", sweep_pk)


@shared_task(name="jobs.tasks.advance_study", acks_late=True)
def advance_study(sweep_pk: int) -> None:
    studies.study_advance(sweep_pk)


@shared_task(name="jobs.tasks.advance_studies", acks_late=True)
def advance_studies() -> int:
    return studies.studies_advance()
