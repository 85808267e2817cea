"""Make (or reuse) the execute-node kit's service account and write a fresh token for it."""

import os
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management.base import BaseCommand, CommandError

from accounts.models import AccessToken
from accounts.services import TokenError, token_authenticate, token_create, token_revoke

KIT_LABEL = "execute-node kit"  # the name the kit's tokens are given


class Command(BaseCommand):
    help = (
        "Create the account the execute-node kit's cron job reads placement figures and "
        "reservations with (allowed only to view workstation forecasts), revoke its earlier "
        "kit tokens, and write a new token to a file only its owner can read."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--output", required=True, type=Path,
                            help="where to write the token (created with mode 0600)")  # fmt: skip
        parser.add_argument("--username", default="workstations",
                            help="the service account (default: workstations)")  # fmt: skip
        parser.add_argument("--keep-valid", action="store_true",
                            help="keep the file if it holds a valid kit token")  # fmt: skip

    def handle(self, *args, output: Path, username: str, keep_valid: bool = False,
               **options) -> None:  # fmt: skip
        User = get_user_model()
        account, created = User.objects.get_or_create(username=username)
        if created:
            account.set_unusable_password()  # a token's account, never a login
            account.save(update_fields=["password"])
        elif account.has_usable_password() or account.is_staff or account.is_superuser:
            raise CommandError(f"{username!r} is somebody's login; name another account.")
        account.user_permissions.add(Permission.objects.get(
            content_type__app_label="forecasts", codename="view_workstationforecast"))  # fmt: skip
        if keep_valid and self._holds_a_kit_token(output, account):
            self.stdout.write(f"{output} holds a valid token for {username} already.")
            return
        for earlier in AccessToken.objects.filter(user=account, name=KIT_LABEL, revoked_at=None):
            token_revoke(token=earlier, actor=None)
        try:
            secret = token_create(user=account, name=KIT_LABEL).secret
        except TokenError as exc:
            raise CommandError(exc.message) from exc
        try:
            descriptor = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc.strerror}.") from exc
        with os.fdopen(descriptor, "w") as file:
            os.fchmod(file.fileno(), 0o600)
            file.write(secret + "\n")
        self.stdout.write(f"A token for {username} (may view forecasts) is in {output}.")

    @staticmethod
    def _holds_a_kit_token(path: Path, account) -> bool:
        try:
            secret = path.read_text().strip()
        except OSError:
            return False
        token = token_authenticate(secret)
        return token is not None and token.user_id == account.pk and token.name == KIT_LABEL
