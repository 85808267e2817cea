"""System checks for a production deployment (`manage.py check --deploy`), beyond Django's."""

from __future__ import annotations

import os
import stat

from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.security, deploy=True)
def secret_key_is_not_the_development_default(app_configs, **kwargs) -> list[checks.CheckMessage]:
    # Django's own check accepts this key (long, varied); it is public, in this repository.
    if settings.SECRET_KEY == settings.DEVELOPMENT_SECRET_KEY:
        return [
            checks.Error(
                "SECRET_KEY is the development default from the repository.",
                hint="Set SECRET_KEY (or SECRET_KEY_FILE) to a long random value, e.g. from "
                "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`.",
                id="nightshift.E001",
            )
        ]
    return []


@checks.register(checks.Tags.security, deploy=True)
def https_is_on(app_configs, **kwargs) -> list[checks.CheckMessage]:
    if not settings.HTTPS:
        return [
            checks.Warning(
                "NIGHTSHIFT_HTTPS is off: sign-in cookies and tokens would cross the network "
                "in clear.",
                hint="Serve the portal over TLS (deploy/production) and set NIGHTSHIFT_HTTPS=true.",
                id="nightshift.W001",
            )
        ]
    return []


@checks.register(checks.Tags.security, deploy=True)
def secret_files_are_private(app_configs, **kwargs) -> list[checks.CheckMessage]:
    found = []
    for path in [
        *settings.SECRET_FILES,
        *([settings.SETTINGS_FILE] if settings.SETTINGS_FILE else []),
    ]:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            continue  # the settings file is root's to read; the portal may not even see it
        if mode & 0o077:
            found.append(
                checks.Warning(
                    f"{path} holds secrets and other accounts may read it (mode {mode:o}).",
                    hint=f"chmod 600 {path}, owned by the account that reads it "
                    "(docs/operations.md).",
                    id="nightshift.W002",
                )
            )
    return found
