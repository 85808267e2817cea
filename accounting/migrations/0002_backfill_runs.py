from datetime import timedelta

from django.db import migrations


def backfill_runs(apps, schema_editor):
    """Jobs that ran before usage records existed: one record from their latest run, which is
    what quotas counted until now, so that nobody's usage drops to zero on upgrade."""
    Job = apps.get_model("jobs", "Job")
    UsageRecord = apps.get_model("accounting", "UsageRecord")
    rows = []
    started = Job.objects.filter(started_at__isnull=False).exclude(usage_records__isnull=False)
    for job in started.iterator(chunk_size=2000):
        final = job.state in ("completed", "failed", "removed")
        end = job.finished_at if final else None
        if final and end is None:
            continue
        wall = max((end - job.started_at).total_seconds(), 0.0) if end else 0.0
        rows.append(
            UsageRecord(
                job_id=job.pk,
                user_id=job.owner_id,
                lab_id=job.lab_id,
                started_at=job.started_at,
                ended_at=job.started_at + timedelta(seconds=wall) if end else None,
                workstation=job.workstation,
                gpu_model=job.gpu_model,
                gpus=job.gpus,
                wall_s=wall,
                committed_s=wall if job.state in ("completed", "failed") else 0.0,
                first_run=True,
                wait_s=max((job.started_at - job.created_at).total_seconds(), 0.0),
                ended_by={
                    "completed": "completed",
                    "failed": "completed",
                    "removed": "removed",
                }.get(job.state, ""),
            )
        )
    UsageRecord.objects.bulk_create(rows, batch_size=2000, ignore_conflicts=True)


class Migration(migrations.Migration):
    dependencies = [
        ("accounting", "0001_initial"),
        ("jobs", "0010_job_outcome"),
    ]

    operations = [migrations.RunPython(backfill_runs, migrations.RunPython.noop)]
