"""Write a fresh execute-node kit credential: it reads the placement figures and
reservations of the workstations it names, and nothing else. Making one revokes the kit's
earlier ones, and the personal-token account that kits used before."""

import os
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management.base import BaseCommand, CommandError

from accounts.models import AccessToken
from accounts.services import token_revoke
from forecasts.services import (
    KitCredentialError,
    kit_credential_authenticate,
    kit_credential_create,
)

KIT_LABEL = "execute-node kit"  # the label the kit's credentials are given
# Before kit credentials, kits held a personal token of this account: a full user's.
LEGACY_ACCOUNT = "workstations"


class Command(BaseCommand):
    help = (
        "Make a credential for the execute-node kit of the named workstations (names or "
        "patterns such as ws-*): it reads their placement figures and reservations and "
        "nothing else. The kit's earlier credentials are revoked, and it is written to a file "
        "only its owner can read."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--output",
            required=True,
            type=Path,
            help="where to write the credential (created with mode 0600)",
        )
        parser.add_argument(
            "--workstations",
            required=True,
            help="the kit's workstations, comma-separated names or patterns "
            "(ws-42, or ws-* for a pool of them)",
        )
        parser.add_argument(
            "--label",
            default=KIT_LABEL,
            help="which kit (default: execute-node kit); one credential each",
        )
        parser.add_argument(
            "--keep-valid",
            action="store_true",
            help="keep the file if it holds a valid credential for the same workstations",
        )

    def handle(
        self,
        *args,
        output: Path,
        workstations: str,
        label: str = KIT_LABEL,
        keep_valid: bool = False,
        **options,
    ) -> None:
        wanted = [name.strip() for name in workstations.split(",") if name.strip()]
        self._retire_legacy_account()
        if keep_valid and self._holds(output, label, wanted):
            self.stdout.write(f"{output} holds a valid kit credential for {workstations}.")
            return
        try:
            _, secret = kit_credential_create(label=label, workstations=wanted)
        except KitCredentialError as exc:
            raise CommandError(str(exc)) from exc
        try:
            descriptor = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc.strerror}.") from exc
        with os.fdopen(descriptor, "w") as file:
            os.fchmod(file.fileno(), 0o600)
            file.write(secret + "\n")
        self.stdout.write(
            f"A kit credential for {', '.join(wanted)} (placement figures and reservations, "
            f"nothing else) is in {output}; the kit's earlier ones are revoked."
        )

    def _retire_legacy_account(self) -> None:
        """The account older kits held a personal token of loses its tokens and its
        permission: such a token could mint more tokens and submit jobs."""
        account = get_user_model().objects.filter(username=LEGACY_ACCOUNT).first()
        if account is None or account.has_usable_password() or account.is_staff:
            return
        for token in AccessToken.objects.filter(user=account, revoked_at=None):
            token_revoke(token=token, actor=None)
        account.user_permissions.remove(
            *Permission.objects.filter(codename="view_workstationforecast")
        )
        if account.is_active:
            account.is_active = False
            account.save(update_fields=["is_active"])
            self.stdout.write(f"The account {LEGACY_ACCOUNT!r} older kits used is retired.")

    @staticmethod
    def _holds(path: Path, label: str, wanted: list[str]) -> bool:
        try:
            secret = path.read_text().strip()
        except OSError:
            return False
        credential = kit_credential_authenticate(secret)
        return (
            credential is not None
            and credential.label == label
            and list(credential.workstations) == wanted
        )
