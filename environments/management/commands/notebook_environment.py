"""Make the site's notebook environment when there is none: JupyterLab and a scientific
stack (NIGHTSHIFT_NOTEBOOK_REQUIREMENTS), locked against the package index now. make run
and a production install run it; it does nothing once the environment exists."""

from django.core.management.base import BaseCommand, CommandError

from environments.services import EnvironmentError, site_notebook_environment_ensure


class Command(BaseCommand):
    help = "Make the site's notebook environment (JupyterLab and a scientific stack) if missing."

    def handle(self, *args, **options):
        try:
            environment, made = site_notebook_environment_ensure()
        except EnvironmentError as exc:
            raise CommandError(
                f"The site's notebook environment could not be made: {exc.message}"
            ) from None
        version = environment.versions.first()
        state = "made now" if made else "already there"
        self.stdout.write(
            f"  notebooks: {version.reference} ({version.package_count} packages), {state}"
        )
