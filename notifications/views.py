"""The notification settings page: which events, by which channels; this browser's
notifications; a webhook; what was sent lately. And the service worker that shows pushes."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from . import channels, selectors, services
from .events import Channel, Event
from .models import PushSubscription

SERVICE_WORKER = settings.BASE_DIR / "static" / "js" / "service-worker.js"


def _page(request: HttpRequest, *, status: int = 200, **extra) -> HttpResponse:
    user = request.user
    context = {
        "groups": selectors.preference_groups_for(user),
        "channels": selectors.CHANNELS,
        "subscriptions": selectors.push_subscriptions_of(user),
        "webhook": selectors.webhook_of(user),
        "recent": selectors.notifications_recent_for(user),
        "push_key": channels.push_public_key(),
        "has_email": bool(user.email),
        **extra,
    }
    return render(request, "notifications/settings.html", context, status=status)


@login_required
def notification_settings(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _page(request)
    chosen = {
        event: {channel for channel in Channel.values if f"{event}:{channel}" in request.POST}
        for event in Event.values
    }
    services.preferences_set(user=request.user, chosen=chosen)
    messages.success(request, "Your notification choices are saved.")
    return redirect("notifications:settings")


@login_required
@require_POST
def push_subscribe(request: HttpRequest) -> JsonResponse:
    try:
        data = json.loads(request.body or b"{}")
    except ValueError:
        return JsonResponse({"error": "The browser sent no subscription."}, status=400)
    if not isinstance(data, dict):
        return JsonResponse({"error": "The browser sent no subscription."}, status=400)
    try:
        subscription = services.push_subscription_add(
            user=request.user,
            subscription=data.get("subscription"),
            label=str(data.get("label") or "")[:200],
        )
    except services.NotificationError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    except services.PushOff as exc:
        return JsonResponse({"error": str(exc)}, status=409)
    return JsonResponse({"id": subscription.pk}, status=201)


@login_required
@require_POST
def push_unsubscribe(request: HttpRequest, subscription_id: int) -> HttpResponse:
    subscription = get_object_or_404(PushSubscription, pk=subscription_id, user=request.user)
    services.push_subscription_remove(user=request.user, subscription=subscription)
    messages.success(request, "That browser gets no more notifications from Nightshift.")
    return redirect("notifications:settings")


@login_required
@require_POST
def webhook_save(request: HttpRequest) -> HttpResponse:
    action = request.POST.get("action", "save")
    if action == "remove":
        services.webhook_remove(user=request.user)
        messages.success(request, "The webhook is removed.")
        return redirect("notifications:settings")
    if action == "rotate":
        if selectors.webhook_of(request.user) is None:
            return HttpResponseBadRequest("There is no webhook.")
        secret = services.webhook_secret_rotate(user=request.user)
        return _page(request, new_secret=secret)
    url = request.POST.get("url", "")
    try:
        _, secret = services.webhook_set(user=request.user, url=url)
    except services.NotificationError as exc:
        return _page(request, status=400, webhook_error=str(exc), webhook_url=url)
    if secret is None:
        messages.success(request, "The webhook's address is changed; its secret is the same.")
        return redirect("notifications:settings")
    return _page(request, new_secret=secret)


@login_required
@require_POST
def send_test(request: HttpRequest) -> HttpResponse:
    sent = services.notification_test_send(user=request.user)
    if sent is None:
        messages.error(
            request,
            "There is nowhere to send it yet: turn on this browser's notifications, give an "
            "e-mail address or set a webhook.",
        )
    else:
        ways = {delivery.channel for delivery in sent.deliveries.all()}
        names = [name for channel, name in selectors.CHANNELS if channel in ways]
        messages.success(request, f"A test is on its way by {', '.join(names)}.")
    return redirect("notifications:settings")


@require_GET
def service_worker(request: HttpRequest) -> HttpResponse:
    """The service worker, from the site's root so that its scope is the whole portal."""
    response = HttpResponse(SERVICE_WORKER.read_bytes(), content_type="text/javascript")
    response["Cache-Control"] = "no-cache"
    return response
