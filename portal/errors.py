"""What Django's error reports (mailed to ADMINS; shown when DEBUG is on) may contain."""

import re

from django.views.debug import SafeExceptionReporterFilter


class SecretsHiddenFilter(SafeExceptionReporterFilter):
    """Django's filter hides settings named like KEY, SECRET, PASS or TOKEN; ours also hides
    the URLs that carry a password inside them (Redis, the Celery broker, databases)."""

    hidden_settings = re.compile(
        r"API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|BROKER|REDIS|DATABASE|_URL$",
        flags=re.IGNORECASE,
    )
