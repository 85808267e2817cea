from __future__ import annotations

import ipaddress
import secrets

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from audit.services import client_ip

from .metrics import PortalCollector


def _scraper_allowed(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    sent = request.headers.get("Authorization", "")
    if token and secrets.compare_digest(sent.encode(), f"Bearer {token}".encode()):
        return True
    address = client_ip(request)
    if address is None:
        return False
    ip = ipaddress.ip_address(address)
    return any(ip in network for network in settings.METRICS_ALLOW)


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not _scraper_allowed(request):
        return HttpResponse(
            "Metrics are for the monitoring server: send its bearer token "
            "(NIGHTSHIFT_METRICS_TOKEN) or scrape from an address in NIGHTSHIFT_METRICS_ALLOW.\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PortalCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
