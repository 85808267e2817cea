from __future__ import annotations

import re
from urllib.parse import urlencode

from csp.decorators import csp_update
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from jobs.models import Job
from jobs.services import JobSubmissionError

from .access import service_name
from .forms import SessionForm
from .origins import base_url_of, origin_of
from .proxy import BEGIN, ENTER
from .selectors import (
    live_is_running,
    live_is_shared,
    live_job_or_none,
    live_may_open,
    live_tokens_of,
)
from .services import LiveError, live_share_set, live_ticket, live_token_create, live_token_revoke
from .sessions import session_status, session_submit

# The digest of the secret the live proxy gave the browser (proxy.BEGIN).
BIND = re.compile(r"[0-9a-f]{64}")


def _framing_live(response: HttpResponse, job: Job) -> HttpResponse:
    """The session page frames the live proxy's pages for this job: its origin joins the
    page's Content Security Policy (django-csp's per-response update)."""
    sources = ["'self'", origin_of(live_base_url(job))]  # 'self': the frame's first stop
    return csp_update({"frame-src": sources})(lambda _: response)(None)


def _job_or_404(user, public_id) -> Job:
    job = live_job_or_none(str(public_id))
    if job is None or not job.live_services or not live_may_open(user, job):
        raise Http404("No such job")
    return job


def live_base_url(job: Job) -> str:
    """Where the live proxy serves this job (live_sessions.origins)."""
    return base_url_of(str(job.public_id))


def _service_url(job: Job, service: str) -> str:
    return f"{live_base_url(job)}/live/{job.public_id}/{service}/"


@never_cache
@login_required
@require_GET
def live_page(request: HttpRequest, public_id) -> HttpResponse:
    job = _job_or_404(request.user, public_id)
    services = [
        {
            "name": name,
            "label": service_name(name),
            "url": _service_url(job, name),
            "open_url": reverse("live:open", args=[job.public_id, name]),
        }
        for name in job.live_services
    ]
    return _framing_live(
        render(
            request,
            "live_sessions/job.html",
            {
                "job": job,
                "services": services,
                "running": live_is_running(job),
                "is_session": "notebook" in job.live_services,
                "session": session_status(job, now=timezone.now()),
                "is_owner": job.owner_id == request.user.pk,
                "shared": live_is_shared(job),
                "tokens": live_tokens_of(job, request.user),
                "new_token": request.session.pop("live_new_token", None),
            },
        ),
        job,
    )


@never_cache
@login_required
@require_GET
def live_open(request: HttpRequest, public_id, service: str) -> HttpResponse:
    """Into the live proxy, with a ticket that names the user: it sets its own cookie."""
    job = _job_or_404(request.user, public_id)
    if service not in job.live_services:
        raise Http404("No such service")
    # A finished job's TensorBoard opens on its kept event files.
    finished_tensorboard = service == "tensorboard" and job.is_final
    if not live_is_running(job) and not finished_tensorboard:
        messages.info(
            request,
            f"The job is {job.get_state_display().lower()}, not running: "
            f"its {service_name(service)} opens while it runs.",
        )
        return redirect("live:page", job.public_id)
    bind = request.GET.get("bind", "")
    if not BIND.fullmatch(bind):
        # First to the proxy, which gives this browser the secret the ticket is bound to.
        return HttpResponseRedirect(_service_url(job, service).rstrip("/") + BEGIN)
    ticket = live_ticket(user=request.user, job=job, service=service, bind=bind)
    target = _service_url(job, service).rstrip("/") + ENTER + "?" + urlencode({"ticket": ticket})
    return HttpResponseRedirect(target)


@login_required
@require_POST
def live_token_new(request: HttpRequest, public_id) -> HttpResponse:
    job = _job_or_404(request.user, public_id)
    try:
        _, secret = live_token_create(user=request.user, job=job, name=request.POST.get("name", ""))
    except LiveError as exc:
        messages.error(request, str(exc))
    else:
        # Shown once, on the page this redirects to.
        request.session["live_new_token"] = secret
    return redirect("live:page", job.public_id)


@login_required
@require_POST
def live_token_revoke_view(request: HttpRequest, public_id, token_id: int) -> HttpResponse:
    job = _job_or_404(request.user, public_id)
    token = get_object_or_404(job.live_tokens, pk=token_id, user=request.user)
    live_token_revoke(user=request.user, token=token)
    messages.success(request, f"Token {token} revoked.")
    return redirect("live:page", job.public_id)


@login_required
@require_POST
def live_share(request: HttpRequest, public_id) -> HttpResponse:
    job = _job_or_404(request.user, public_id)
    if job.owner_id != request.user.pk:
        raise Http404("No such job")
    shared = request.POST.get("shared") == "1"
    live_share_set(user=request.user, job=job, shared=shared)
    messages.success(
        request,
        "Shared with your lab's leads and the admins." if shared else "Only you can open it now.",
    )
    return redirect("live:page", job.public_id)


@never_cache
@login_required
@require_GET
def live_status(request: HttpRequest, public_id) -> JsonResponse:
    """What the session page refreshes: state, time left, the warning, why it ended."""
    job = _job_or_404(request.user, public_id)
    return JsonResponse(session_status(job, now=timezone.now()).as_json())


@login_required
def session_new(request: HttpRequest) -> HttpResponse:
    asked = (
        {"software_environment": request.GET["environment"]} if "environment" in request.GET else {}
    )
    form = SessionForm(request.POST or None, user=request.user, initial=asked)
    if request.method == "POST" and form.is_valid():
        try:
            job = session_submit(user=request.user, spec=form.to_spec())
        except JobSubmissionError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            return redirect("live:page", job.public_id)
    status = 400 if request.method == "POST" else 200
    return render(request, "live_sessions/new.html", {"form": form}, status=status)
