from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.template.defaultfilters import filesizeformat

from operations.purge import outputs_due, outputs_purge


class Command(BaseCommand):
    help = (
        "Remove the output files of jobs that ended more than N days ago: each lab's own "
        "retention (Labs in the admin), else --days; jobs under neither are kept. Lists what "
        "it would remove unless --apply. Jobs, logs and records stay."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=int,
            default=None,
            help="for labs without their own retention, and jobs in no lab",
        )
        parser.add_argument(
            "--apply", action="store_true", help="remove the files (without it, only list them)"
        )

    def handle(self, *args, days: int | None, apply: bool, **options) -> None:
        if days is not None and days < 1:
            raise CommandError("--days must be 1 or more.")
        due = outputs_due(default_days=days)
        if not due.jobs:
            self.stdout.write("No outputs are due for removal.")
            return
        self.stdout.write(f"{'Lab':<30} {'Days':>5} {'Jobs':>6} {'Files':>7} {'Size':>10}")
        for lab in due.by_lab:
            self.stdout.write(
                f"{lab.lab[:30]:<30} {lab.days:>5} {len(lab.jobs):>6} "
                f"{lab.files:>7} {filesizeformat(lab.bytes):>10}"
            )
        total = f"{due.jobs} jobs' outputs ({due.files} files, {filesizeformat(due.bytes)})"
        if not apply:
            self.stdout.write(f"Dry run: {total} would be removed. Run with --apply to remove.")
            return
        outputs_purge(due)
        self.stdout.write(
            f"Removed {due.removed_files} files "
            f"({filesizeformat(due.removed_bytes)}) of {due.jobs} jobs."
        )
        for failure in due.failures:
            self.stderr.write(f"could not remove {failure}")
        if due.failures:
            raise CommandError(
                f"{len(due.failures)} files could not be removed; run as the account that "
                "owns the job folders."
            )
