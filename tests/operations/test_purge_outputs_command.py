"""`manage.py purge_outputs`: outputs of jobs that ended long ago go, by each lab's own
retention or --days; it only lists them unless --apply; jobs, logs and records stay."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEntry
from jobs import specs, submission
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.factories import LabFactory

pytestmark = pytest.mark.django_db


def purge(*args: str) -> str:
    out = StringIO()
    call_command("purge_outputs", *args, stdout=out)
    return out.getvalue()


def ended_job(user, name: str, *, lab=None, days_ago: int, state=JobState.COMPLETED) -> Job:
    job = submission.job_submit(user=user, spec=specs.JobSpec(name=name), script=script_upload())
    (job.directory / "outputs" / "model.pt").write_bytes(b"w" * 1000)
    (job.directory / "outputs" / "curves").mkdir()
    (job.directory / "outputs" / "curves" / "loss.csv").write_text("step,loss\n1,0.5\n")
    (job.directory / "stdout.txt").write_text("done\n")
    finished = None if state == JobState.RUNNING else timezone.now() - timedelta(days=days_ago)
    Job.objects.filter(pk=job.pk).update(state=state, finished_at=finished, lab=lab)
    job.refresh_from_db()
    return job


@pytest.fixture
def jobs(student, fake_bridge):
    vision = LabFactory(name="vision", output_retention_days=30)
    nlp = LabFactory(name="nlp")
    return {
        "vision-old": ended_job(student, "vision-old", lab=vision, days_ago=40),
        "vision-new": ended_job(student, "vision-new", lab=vision, days_ago=10),
        "nlp-old": ended_job(student, "nlp-old", lab=nlp, days_ago=40),
        "nlp-new": ended_job(student, "nlp-new", lab=nlp, days_ago=10),
        "no-lab-old": ended_job(student, "no-lab-old", days_ago=40),
        "running": ended_job(student, "running", lab=nlp, days_ago=0, state=JobState.RUNNING),
    }


def has_outputs(job: Job) -> bool:
    return (job.directory / "outputs" / "model.pt").exists()


def test_without_apply_it_only_lists_by_lab(jobs):
    said = purge("--days", "60")
    assert "vision" in said and "nlp" not in said and "(no lab)" not in said
    assert "Dry run: 1 jobs' outputs (2 files" in said
    assert all(has_outputs(job) for job in jobs.values())
    assert not Job.objects.filter(outputs_purged_at__isnull=False).exists()


def test_apply_follows_each_labs_retention_and_the_default(jobs, student_client, tmp_path):
    outside = tmp_path / "precious.txt"
    outside.write_text("not the job's")
    (jobs["nlp-old"].directory / "outputs" / "link.txt").symlink_to(outside)
    said = purge("--days", "7", "--apply")
    assert "Removed 8 files" in said
    gone = {name for name, job in jobs.items() if not has_outputs(job)}
    assert gone == {"vision-old", "nlp-old", "nlp-new", "no-lab-old"}
    assert outside.read_text() == "not the job's"
    old = jobs["vision-old"]
    old.refresh_from_db()
    assert old.outputs_purged_at is not None
    assert (old.directory / "stdout.txt").read_text() == "done\n"
    assert (old.directory / "train.py").exists()
    event = old.events.get(kind="outputs purged")
    assert event.detail == "2 output files removed after 30 days (vision retention)"
    page = student_client.get(reverse("jobs:detail", args=[old.public_id])).content.decode()
    assert "under the outputs retention policy" in page
    assert AuditEntry.objects.get(action="outputs.purge").detail.startswith("4 jobs, 8 files")
    assert purge("--days", "7", "--apply") == "No outputs are due for removal.\n"


def test_labs_without_retention_are_kept_unless_days_is_given(jobs):
    said = purge("--apply")
    assert "Removed 2 files" in said
    assert {name for name, job in jobs.items() if not has_outputs(job)} == {"vision-old"}


def test_days_must_be_positive(jobs):
    with pytest.raises(CommandError, match="--days must be 1 or more"):
        purge("--days", "0")
