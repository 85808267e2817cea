"""What a locked-out sign-in gets (django-axes): JSON for the API, a page for people."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from plumbing.api import error_body


def lockout_response(
    request: HttpRequest, original_response=None, credentials=None
) -> HttpResponse:
    minutes = max(1, int(settings.AXES_COOLOFF_TIME.total_seconds() // 60))
    if request.path.startswith("/api/"):
        message = (
            "Too many failed sign-ins for this username from your address; "
            f"try again in {minutes} minutes."
        )
        response = JsonResponse(error_body("throttled", message), status=429)
    else:
        response = render(request, "registration/locked_out.html", {"minutes": minutes}, status=429)
    response["Retry-After"] = str(minutes * 60)
    return response
