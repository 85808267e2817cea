from django.core.management.base import BaseCommand, CommandParser

from operations.reconcile import reconcile


class Command(BaseCommand):
    help = (
        "Compare the portal's jobs with the schedd's queue and history, and repair what "
        "drifted apart: jobs the pool runs that the portal does not know or has ended are "
        "removed, missed replies adopted, stale states updated, lost jobs marked failed, and "
        "submissions that never left sent again. --dry-run only lists them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="list, repair nothing")

    def handle(self, *args, dry_run: bool, **options) -> None:
        drifts = reconcile(dry_run=dry_run)
        if not drifts:
            self.stdout.write("The portal and the schedd agree: nothing to repair.")
            return
        verb = "would be" if dry_run else "was"
        for drift in drifts:
            where = f"HTCondor {drift.condor_id}" if drift.condor_id else "not in HTCondor"
            portal = drift.portal_state or "unknown to the portal"
            pool = drift.pool_state or "not in the pool"
            self.stdout.write(
                f"{drift.kind:<10} job {drift.job_id} ({where}; portal: {portal}; "
                f"pool: {pool}) {verb} {drift.repair}"
            )
        summary = f"{len(drifts)} difference{'s' if len(drifts) != 1 else ''}"
        self.stdout.write(
            f"{summary} found; run without --dry-run to repair them."
            if dry_run
            else f"{summary} repaired."
        )
