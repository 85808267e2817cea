"""The live proxy's ASGI application: uvicorn portal.asgi_live:application.

It serves /live/<job>/<service>/... only (live_sessions.proxy); everything else is the
portal's gunicorn. One process: it holds the tunnels, so it runs with a single worker.
"""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()

from live_sessions.proxy import build_application  # noqa: E402 - after django.setup()

application = build_application()
