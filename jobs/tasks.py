"""Thin Celery tasks: they take ids, call a service, and own their retries."""

from __future__ import annotations

import logging

from celery import shared_task

from condor_bridge import BridgeError

from . import submission, sync
from .models import Job
from .submission import SUBMISSION_RETRIES

logger = logging.getLogger(__name__)


@shared_task(**SUBMISSION_RETRIES)
def submit_job(self, job_pk: int) -> None:
    try:
        submission.job_submit_to_pool(job_pk)
    except Job.DoesNotExist:
        logger.warning("job %s was deleted before it could be submitted", job_pk)


@shared_task(acks_late=True)
def sync_jobs() -> dict:
    report = sync.jobs_sync()
    return {
        "active": report.active,
        "changed": report.changed,
        "seconds": report.seconds,
        "phases": report.phases,
    }


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(BridgeError,),
    retry_backoff=2,
    retry_backoff_max=60,
    max_retries=20,
)
def collect_outputs(self, job_pk: int) -> None:
    try:
        sync.job_collect_outputs(job_pk)
    except Job.DoesNotExist:
        logger.warning("job %s was deleted before its outputs were collected", job_pk)
