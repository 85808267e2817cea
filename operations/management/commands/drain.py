from django.core.management.base import BaseCommand, CommandParser

from operations.drain import drain_start, drain_state, drain_stop


class Command(BaseCommand):
    help = (
        "Maintenance: stop accepting submissions and show a banner on every page (jobs "
        "already accepted run on). `drain --off` accepts submissions again; `drain --status` "
        "only says which it is."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--off", action="store_true", help="accept submissions again")
        group.add_argument("--status", action="store_true", help="say whether a drain is on")
        parser.add_argument("--message", default="", help="the banner's text")

    def handle(self, *args, off: bool, status: bool, message: str, **options) -> None:
        if status:
            state = drain_state()
        elif off:
            state = drain_stop()
        else:
            state = drain_start(message=message)
        if state.active:
            self.stdout.write(
                f"Draining since {state.started_at:%Y-%m-%d %H:%M %Z}: submissions are refused "
                f"and every page says: {state.message}"
            )
        else:
            self.stdout.write("Not draining: submissions are accepted.")
