"""Output retention: the output files of jobs that ended long enough ago are removed, by
each lab's policy (Lab.output_retention_days) or a default; the jobs, their logs and their
records stay."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from audit.services import audit_record
from jobs.models import FINAL_STATES, Job
from jobs.selectors import OutputFile, job_output_files, job_output_path
from jobs.services import job_event_record
from labs.models import Lab

NO_LAB = "(no lab)"


@dataclass
class LabPurge:
    lab: str
    days: int
    # Each job due, with the output files found when it was listed.
    jobs: list[tuple[Job, list[OutputFile]]] = field(default_factory=list)

    @property
    def files(self) -> int:
        return sum(len(files) for _, files in self.jobs)

    @property
    def bytes(self) -> int:
        return sum(f.size for _, files in self.jobs for f in files)


@dataclass
class PurgeResult:
    by_lab: list[LabPurge]
    removed_files: int = 0
    removed_bytes: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def jobs(self) -> int:
        return sum(len(lab.jobs) for lab in self.by_lab)

    @property
    def files(self) -> int:
        return sum(lab.files for lab in self.by_lab)

    @property
    def bytes(self) -> int:
        return sum(lab.bytes for lab in self.by_lab)


def outputs_due(*, default_days: int | None, now: datetime | None = None) -> PurgeResult:
    """Jobs whose outputs are due for removal, by lab: a lab's own retention, else
    `default_days`; jobs under neither are kept."""
    now = now or timezone.now()
    ended = Job.objects.filter(
        state__in=FINAL_STATES, outputs_purged_at__isnull=True, finished_at__isnull=False
    ).order_by("finished_at")
    groups: list[tuple[str, int, Q]] = []
    for lab in Lab.objects.filter(output_retention_days__isnull=False).order_by("name"):
        groups.append((lab.name, lab.output_retention_days, Q(lab=lab)))
    if default_days is not None:
        for lab in Lab.objects.filter(output_retention_days__isnull=True).order_by("name"):
            groups.append((lab.name, default_days, Q(lab=lab)))
        groups.append((NO_LAB, default_days, Q(lab__isnull=True)))
    by_lab = []
    for name, days, in_group in groups:
        due = LabPurge(name, days)
        for job in ended.filter(in_group, finished_at__lt=now - timedelta(days=days)):
            files = job_output_files(job)
            if files:
                due.jobs.append((job, files))
        if due.jobs:
            by_lab.append(due)
    return PurgeResult(by_lab)


def outputs_purge(due: PurgeResult, *, actor=None) -> PurgeResult:
    """Remove the files `outputs_due` found. Each file is checked again as the downloads
    check it (inside a kept path, no link on the way), so a link a job left is removed
    without following it, and nothing outside the job's folder is touched."""
    now = timezone.now()
    for lab in due.by_lab:
        for job, files in lab.jobs:
            removed = 0
            for output in files:
                path = job_output_path(job, output.path)
                if path is None:
                    continue
                try:
                    os.unlink(path)
                except OSError as exc:
                    due.failures.append(f"{job.public_id}/{output.path}: {exc.strerror}")
                    continue
                removed += 1
                due.removed_files += 1
                due.removed_bytes += output.size
            Job.objects.filter(pk=job.pk).update(outputs_purged_at=now)
            job.outputs_purged_at = now
            job_event_record(
                job,
                "outputs purged",
                f"{removed} output file{'s' if removed != 1 else ''} removed after "
                f"{lab.days} days ({lab.lab} retention)",
            )
    if due.jobs:
        audit_record(
            action="outputs.purge",
            actor=actor,
            detail=f"{due.jobs} jobs, {due.removed_files} files, "
            f"{due.removed_bytes} bytes; {len(due.failures)} failures",
        )
    return due
