import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from .context import Origin, reset_origin, set_origin


def client_ip(request: HttpRequest) -> str | None:
    """The client's address; behind N trusted proxies, the Nth address from the right of
    X-Forwarded-For (a client can put anything at its left)."""
    proxies = settings.TRUSTED_PROXY_COUNT
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if len(hops) >= proxies and _is_address(hops[-proxies]):
            return hops[-proxies]
    address = request.META.get("REMOTE_ADDR") or ""
    return address if _is_address(address) else None


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


class AuditOriginMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path
        via = (
            "admin" if path.startswith("/admin/") else "api" if path.startswith("/api/") else "web"
        )
        token = set_origin(Origin(ip=client_ip(request), via=via))
        try:
            return self.get_response(request)
        finally:
            reset_origin(token)
