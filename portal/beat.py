"""What Celery beat runs and when (settings.CELERY_BEAT_SCHEDULE): the table, apart from the
settings that give its intervals."""

from __future__ import annotations

from celery.schedules import crontab


def beat_schedule(
    *,
    sync_s: float,
    study_s: float,
    usage_sample_s: int,
    start_prediction_s: int,
    capacity_sample_s: int,
) -> dict:
    return {
        "sync-jobs": {"task": "jobs.tasks.sync_jobs", "schedule": sync_s},
        "advance-studies": {"task": "jobs.tasks.advance_studies", "schedule": study_s},
        "sample-usage": {"task": "usage.tasks.sample_usage", "schedule": usage_sample_s},
        "purge-usage-samples": {
            "task": "usage.tasks.purge_usage_samples",
            "schedule": crontab(minute=30, hour=3),
        },
        "predict-starts": {
            "task": "forecasts.tasks.predict_starts",
            "schedule": start_prediction_s,
        },
        # Each workstation's availability, learnt again from its history, every night.
        "refit-forecasts": {
            "task": "forecasts.tasks.refit_forecasts",
            "schedule": crontab(minute=15, hour=4),
        },
        "sample-capacity": {
            "task": "accounting.tasks.sample_capacity",
            "schedule": capacity_sample_s,
        },
        # What time alone brings people word of: a session near its limit, a long wait, a
        # study that stopped, a reservation about to begin.
        "notify": {"task": "notifications.tasks.scan", "schedule": 60.0},
        "purge-notifications": {
            "task": "notifications.tasks.purge",
            "schedule": crontab(minute=40, hour=3),
        },
        # Work lost when a workstation's owner asked for it back is not charged to quotas.
        "relieve-reclaimed-work": {
            "task": "lending.tasks.relieve_reclaimed_work",
            "schedule": 300.0,
        },
        # Dataset imports whose task or worker was lost start again; their leftovers go.
        "recover-dataset-imports": {"task": "datasets.tasks.recover_imports", "schedule": 300.0},
        # Each lab lead's summary of the month that just ended, on the 1st at 07:00.
        "monthly-usage-reports": {
            "task": "accounting.tasks.send_monthly_reports",
            "schedule": crontab(minute=0, hour=7, day_of_month=1),
        },
    }
