from django.core.management.base import BaseCommand

from forecasts.services import forecasts_refit


class Command(BaseCommand):
    help = "Learn every workstation's availability from the pool's capacity samples, now."

    def handle(self, *args, **options) -> None:
        count = forecasts_refit()
        plural = "" if count == 1 else "s"
        self.stdout.write(f"availability forecasts learnt for {count} workstation{plural}")
