from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from condor_bridge.doctor import RESTART_NEGOTIATOR, Check, diagnose
from jobs.models import Job, JobState
from jobs.services import POOL_STALLED_REASON


class Command(BaseCommand):
    help = (
        "Check the portal's connection to its HTCondor pool: the token, the collector, the "
        "schedd, authentication and authorization, a test submit and removal, the clocks, "
        "the GPUs the collector knows, the negotiator, and idle jobs the pool is not "
        "matching. Says what is wrong and how to fix it; exits 1 if anything is."
    )

    def handle(self, *args, **options) -> None:
        self.stdout.write(
            f"Pool: collector {settings.CONDOR_COLLECTOR}, schedd "
            f"{settings.CONDOR_SCHEDD_NAME or '(the collector’s only one)'}, token folder "
            f"{settings.CONDOR_TOKEN_DIR}, {settings.CONDOR_FILE_MODE} file mode"
        )
        checks = list(self._checks())
        for check in checks:
            mark = "ok  " if check.ok and not check.warning else "warn" if check.ok else "FAIL"
            self.stdout.write(f"[{mark}] {check.name:<14} {check.detail}")
            if check.fix:
                self.stdout.write(f"       {'':<14} fix: {check.fix}")
        failed = [check.name for check in checks if not check.ok]
        if failed:
            raise CommandError(
                f"{len(failed)} check{'s' if len(failed) != 1 else ''} failed: {', '.join(failed)}."
            )
        self.stdout.write("The portal can use this pool.")

    def _checks(self):
        yield self._jobs_folder()
        yield from diagnose(
            collector=settings.CONDOR_COLLECTOR,
            schedd_name=settings.CONDOR_SCHEDD_NAME,
            token_dir=str(settings.CONDOR_TOKEN_DIR),
            probe_dir=str(settings.JOBS_DIR),
        )
        yield self._matching()

    def _matching(self) -> Check:
        """The portal's own view: idle jobs that a free workstation could run, waiting."""
        limit = settings.POOL_STALL_AFTER_S
        try:
            stalled = Job.objects.filter(
                state=JobState.IDLE, wait_reason=POOL_STALLED_REASON
            ).count()
        except DatabaseError as exc:
            return Check(
                "matching",
                False,
                f"The portal's database cannot be read: {exc}",
                "Check DATABASE_URL and that PostgreSQL runs.",
            )
        if stalled:
            return Check(
                "matching",
                False,
                f"{stalled} idle job{'s' if stalled != 1 else ''} of this portal "
                f"{'have' if stalled != 1 else 'has'} waited over {limit} s while a "
                "workstation that fits stayed free: the pool is not matching jobs.",
                RESTART_NEGOTIATOR + " If the negotiator check above passes, restart "
                "the schedd too (condor_restart -daemon schedd).",
            )
        return Check(
            "matching",
            True,
            f"No idle job has waited over {limit} s beside a free workstation that fits it.",
        )

    def _jobs_folder(self) -> Check:
        folder = Path(settings.JOBS_DIR)
        if not folder.is_dir():
            fix = "Create it (NIGHTSHIFT_JOBS_DIR), owned by the portal's account."
            return Check("jobs folder", False, f"{folder} does not exist.", fix)
        probe = folder / ".condor-doctor-probe"
        try:
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            return Check(
                "jobs folder",
                False,
                f"The portal cannot write to {folder}: {exc.strerror}.",
                "Make the portal's account its owner.",
            )
        if settings.CONDOR_FILE_MODE == "shared" and settings.JOB_DIR_UID is None:
            return Check(
                "jobs folder",
                True,
                f"{folder} is writable.",
                "Shared mode: set NIGHTSHIFT_JOB_DIR_UID to the uid jobs run as on "
                "the workstations, so that they may write their outputs.",
                warning=True,
            )
        return Check("jobs folder", True, f"{folder} is writable.")
