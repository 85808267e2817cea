from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from celery import current_app
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.files import File
from django.core.paginator import Paginator
from django.db import connection
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    JsonResponse,
    StreamingHttpResponse,
)
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.cache import get_conditional_response
from django.views.decorators.cache import cache_control, never_cache
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from plumbing.panels import panels_for
from plumbing.spreadsheets import stream_csv

from . import actions, polling, readouts, selectors, specs, staging, submission
from .bridge import get_bridge
from .filters import JobListFilter
from .forms import JobSubmitForm
from .lookups import actionable_job_or_403, own_job_or_403, visible_job_or_404
from .models import Job
from .schedulers import schedd_problem

JOBS_PER_PAGE = 25


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    filters = JobListFilter(
        request.GET or None, queryset=selectors.job_list_visible_to(request.user), request=request
    )
    page = Paginator(filters.qs, JOBS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    query.pop("fragment", None)
    context = {
        "filters": filters,
        "page": page,
        "jobs": page.object_list,
        "all_final": all(job.is_final for job in page.object_list),
        "query": query.urlencode(),
    }
    template = "jobs/_list_table.html" if request.GET.get("fragment") else "jobs/list.html"
    return render(request, template, context)


# Service fields that the form spells differently.
FORM_FIELD_FOR = {
    "script_name": "script",
    "memory_mb": "memory_gb",
    "max_runtime_s": "max_runtime_minutes",
    "output_paths": "keep_outputs",
}


def show_refusal(
    form, exc: specs.JobSubmissionError, field_for: Mapping[str, str] = FORM_FIELD_FOR
) -> None:
    """A service's refusal on the form field it names (or above the form)."""
    field = field_for.get(exc.field, exc.field)
    form.add_error(field if field in form.fields else None, exc.message)


def _initial_from(job: Job) -> dict:
    spec = specs.job_spec_of(job)
    return {
        "name": spec.name,
        "arguments": "\n".join(spec.arguments),
        "entry_command": spec.entry_command or "",
        "keep_outputs": ", ".join(spec.output_paths),
        "environment": spec.environment,
        "gpus": spec.gpus,
        "gpu_memory_gb": spec.gpu_memory_gb,
        "gpu_capability": spec.gpu_capability,
        "cpus": spec.cpus,
        "memory_gb": round(spec.memory_mb / 1024, 3),
        "max_runtime_minutes": spec.max_runtime_s // 60 if spec.max_runtime_s else None,
        # A clone's deadline is the user's to choose again: the original's may have passed.
        "notify_by_email": spec.notify_by_email,
        "software_environment": spec.software or "",
        "datasets": list(spec.datasets),
        "models": list(spec.models),
        "live_services": list(spec.live_services),
        "source_job": job.public_id,
        "lab": job.lab_id,
    }


# Requests a clone link may change (`?from=ID&memory_gb=4`): the job page's advice and a
# hold's explanation offer the request that fits what the job used. They only fill the form
# in; its own validation decides on submission.
CLONE_ADJUSTABLE = {"gpus": int, "cpus": int, "memory_gb": float}


def clone_adjustments(query: Mapping[str, str]) -> dict:
    """The adjustable requests a clone link names, those that parse; others are left out."""
    adjusted = {}
    for name, kind in CLONE_ADJUSTABLE.items():
        raw = query.get(name)
        if raw is None or len(raw) > 12:
            continue
        try:
            value = kind(raw)
        except ValueError:
            continue
        if value >= 0 and math.isfinite(value):
            adjusted[name] = value
    return adjusted


# File fields whose upload is kept across a form error, and the hidden field with its token.
KEPT_UPLOADS = {"script": "staged_upload", "requirements": "staged_requirements"}


def submit_job(request: HttpRequest, form: JobSubmitForm, **files) -> HttpResponse:
    """Submit the job the valid form describes (files: script, copy_from, requirements) and
    go to its page; JobSubmissionError when a service refuses it."""
    job = submission.job_submit(user=request.user, spec=form.to_spec(), **files)
    messages.success(request, f"“{job.name}” is on its way to the pool.")
    return redirect("jobs:detail", public_id=job.public_id)


@dataclass(frozen=True)
class JobForm:
    """The form the new-job page, its live match count and its preview use; how a valid one
    is submitted (answering with the page to go to); and which form field each service
    field is. experiments hands in the job form with a sweep's fields from its
    AppConfig.ready()."""

    form_class: type[JobSubmitForm] = JobSubmitForm
    submit: Callable[..., HttpResponse] = submit_job
    field_for: Mapping[str, str] = dataclasses.field(default_factory=lambda: FORM_FIELD_FOR)


_job_form = JobForm()


def job_form_register(job_form: JobForm) -> None:
    global _job_form
    _job_form = job_form


@login_required
def job_new(request: HttpRequest) -> HttpResponse:
    form_class, submit, field_for = _job_form.form_class, _job_form.submit, _job_form.field_for
    source = None
    staged: dict[str, File] = {}
    if request.method == "GET" and request.GET.get("from"):
        source = own_job_or_403(request.user, request.GET["from"])
        initial = _initial_from(source) | clone_adjustments(request.GET)
        form = form_class(initial=initial, user=request.user)
    elif request.method == "GET" and request.GET.get("model"):
        # "Start a job with this model", from a model's page: only ticks its box; the
        # form's own choices decide what may be used.
        form = form_class(initial={"models": [request.GET["model"][:200]]}, user=request.user)
    else:
        for field, token_field in KEPT_UPLOADS.items():
            kept = staging.upload_staged(user=request.user, token=request.POST.get(token_field, ""))
            if kept is not None:
                staged[field] = kept
        form = form_class(
            request.POST or None,
            request.FILES or None,
            user=request.user,
            staged_names={field: kept.name for field, kept in staged.items()},
        )
    try:
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            upload = data["script"] or staged.get("script")
            requirements = data.get("requirements") or staged.get("requirements")
            try:
                copy_from = None
                if not upload and data["source_job"]:
                    copy_from = own_job_or_403(request.user, data["source_job"])
                submitted = submit(
                    request, form, script=upload, copy_from=copy_from, requirements=requirements
                )
            except specs.JobSubmissionError as exc:
                show_refusal(form, exc, field_for)
            else:
                for token_field in KEPT_UPLOADS.values():
                    staging.upload_discard(user=request.user, token=data.get(token_field, ""))
                return submitted
    finally:
        for kept in staged.values():
            kept.close()
    if form.is_bound and form.errors:
        _keep_uploads(request, form)
    if source is None and form.is_bound and form.data.get("source_job"):
        try:
            source = selectors.job_get_for_user(request.user, form.data["source_job"])
        except (Job.DoesNotExist, ValueError, ValidationError):
            source = None
    return render(
        request,
        "jobs/new.html",
        {"form": form, "source": source},
        status=400 if form.errors else 200,
    )


def _keep_uploads(request: HttpRequest, form: JobSubmitForm) -> None:
    """Keep the files the student chose, so that fixing a field does not mean choosing again."""
    for field, token_field in KEPT_UPLOADS.items():
        upload = request.FILES.get(field)
        if upload is None:
            continue
        try:
            token = staging.upload_stage(user=request.user, upload=upload)
        except specs.JobSubmissionError:
            continue
        form.data = form.data.copy()
        form.data[token_field] = token
        form.staged_names[field] = upload.name


@login_required
def job_detail(request: HttpRequest, public_id) -> HttpResponse:
    job = visible_job_or_404(request.user, public_id)
    return render(
        request,
        "jobs/detail.html",
        {
            "job": job,
            "events": job.events.all(),
            "runs": job.usage_records.all(),
            "checkpoint": selectors.checkpoint_of(job),
            "outputs": selectors.job_output_files(job),
            "reproduction": selectors.reproduction_of(job),
            "pip_freeze": selectors.job_pip_freeze(job),
            "schedd_problem": schedd_problem(job),
            "panels": panels_for("job", user=request.user, job=job),
            **_permissions(request, job),
        },
    )


def _permissions(request: HttpRequest, job: Job) -> dict:
    return {
        "can_act": selectors.job_can_act(request.user, job),
        "is_owner": job.owner_id == request.user.pk,
    }


# The page keeps the last answer and asks again with its ETag each time (no-cache is
# "revalidate", not "do not store"); private: it is this viewer's. The middleware in
# jobs.polling answers most of these polls before this view (with only the logs, for a page
# that sends PARTIAL_HEADER), hence the Vary.
@cache_control(private=True, no_cache=True)
@vary_on_headers(polling.PARTIAL_HEADER)
@login_required
@require_GET
def job_status(request: HttpRequest, public_id) -> HttpResponse:
    """Everything the job page refreshes while it is open; 304 when none of it changed."""
    job = visible_job_or_404(request.user, public_id)
    paths = staging.job_logs_for(job)
    offsets = polling.requested_offsets(request.GET, paths)
    permissions = _permissions(request, job)
    problem = schedd_problem(job)
    note = polling.note_for(
        job, user_pk=request.user.pk, logs=paths, context=(sorted(permissions.items()), problem)
    )
    session_key = request.session.session_key
    look = polling.look_now(note, session_key or "")
    # The document is read after the look at what it is built from, never before: a change
    # in between (the sync's) then shows in the next poll, instead of an ETag naming it over
    # a document without it, answered 304 from then on.
    job.refresh_from_db()
    if not problem:
        polling.remember(session_key, job.public_id, note)
    etag = look.etag(offsets)
    unchanged = get_conditional_response(request, etag=etag)
    if unchanged is not None:
        unchanged["ETag"] = etag
        return unchanged
    logs = polling.log_chunks(job.directory, paths, offsets)
    etag = look.next_etag(offsets, logs)
    response = JsonResponse(
        {
            "state": job.state,
            "state_label": job.get_state_display(),
            "status_detail": job.status_detail,
            "hold_reason": job.hold_reason,
            "match_problem": job.match_problem,
            "wait_reason": job.wait_reason,
            "schedd_problem": problem,
            "hold_title": job.hold_explanation.title if job.hold_explanation else "",
            "hold_advice": job.hold_explanation.advice if job.hold_explanation else "",
            "hold_clone_url": job.hold_clone_url,
            "exit_code": job.exit_code,
            "exit_signal": job.exit_signal,
            "workstation": job.ran_on,
            "num_starts": job.starts,
            "condor_id": job.condor_id,
            "is_final": job.is_final,
            "outputs_ready": job.outputs_ready,
            "events": [
                {"at": e.at.isoformat(), "kind": e.kind, "state": e.state, "detail": e.detail}
                for e in job.events.all()
            ],
            "outputs": [
                {
                    "path": f.path,
                    "size": f.size,
                    "url": reverse("jobs:output", args=[job.public_id, f.path]),
                }
                for f in selectors.job_output_files(job)
            ],
            "logs": logs,
            # Without the request: the buttons need its CSRF token, not the context
            # processors every page runs (the drain banner's Redis read among them).
            "actions_html": render_to_string(
                "jobs/_actions.html", {"job": job, **permissions, "csrf_token": get_token(request)}
            ),
        }
    )
    response["ETag"] = etag
    return response


@login_required
@require_GET
def job_log(request: HttpRequest, public_id, stream: str) -> HttpResponse:
    job = visible_job_or_404(request.user, public_id)
    path = staging.job_logs_for(job).get(stream)
    opened = selectors.open_job_file(job.directory, path) if path is not None else None
    if opened is None:
        raise Http404("This log does not exist yet.")
    # FileResponse closes the file when the response is done.
    response = FileResponse(opened, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="{stream}.txt"'
    return response


@login_required
@require_GET
def job_output(request: HttpRequest, public_id, path: str) -> FileResponse:
    return readouts.output_file_response(visible_job_or_404(request.user, public_id), path)


def _job_action(service, done_message: str):
    @login_required
    @require_POST
    def view(request: HttpRequest, public_id) -> HttpResponse:
        job = actionable_job_or_403(request.user, public_id)
        try:
            service(job=job, user=request.user)
        except specs.JobActionError as exc:
            messages.error(request, str(exc))
        else:
            messages.info(request, done_message)
        return redirect("jobs:detail", public_id=job.public_id)

    return view


job_cancel = _job_action(actions.job_cancel, "Cancelling the job.")
job_hold = _job_action(actions.job_hold, "The job is on hold until you release it.")
job_release = _job_action(actions.job_release, "Released: the job goes back to the queue.")


@login_required
@require_POST
def job_rerun(request: HttpRequest, public_id) -> HttpResponse:
    job = own_job_or_403(request.user, public_id)
    try:
        new_job = actions.job_rerun(job=job, user=request.user)
    except specs.JobSubmissionError as exc:
        messages.error(request, exc.message)
        return redirect("jobs:detail", public_id=job.public_id)
    messages.success(request, f"Re-running “{job.name}” with the same script and settings.")
    return redirect("jobs:detail", public_id=new_job.public_id)


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = {"ok": True}
    except Exception as exc:  # noqa: BLE001 - a health check reports every failure
        checks["database"] = {"ok": False, "error": str(exc)}
    try:
        import redis

        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
        checks["redis"] = {"ok": True}
    except Exception as exc:  # noqa: BLE001
        checks["redis"] = {"ok": False, "error": str(exc)}
    try:
        replies = current_app.control.ping(timeout=1.0) or []
        checks["celery"] = {"ok": bool(replies), "workers": len(replies)}
        if not replies:
            checks["celery"]["error"] = "no Celery worker answered within 1 s"
    except Exception as exc:  # noqa: BLE001
        checks["celery"] = {"ok": False, "error": str(exc)}
    try:
        get_bridge().ping()
        checks["schedd"] = {"ok": True}
    except Exception as exc:  # noqa: BLE001
        checks["schedd"] = {"ok": False, "error": str(exc)}
    ok = all(check["ok"] for check in checks.values())
    return JsonResponse({"ok": ok, "checks": checks}, status=200 if ok else 503)


@login_required
@require_GET
def pool(request: HttpRequest) -> HttpResponse:
    template = "pool/_table.html" if request.GET.get("fragment") else "pool/overview.html"
    return render(request, template, {"overview": selectors.pool_overview()})


@never_cache
@login_required
@require_GET
def job_metrics(request: HttpRequest, public_id) -> JsonResponse:
    job = visible_job_or_404(request.user, public_id)
    return JsonResponse(readouts.metrics_payload(job, limit=1000))


@login_required
@require_GET
def job_metrics_csv(request: HttpRequest, public_id) -> StreamingHttpResponse:
    job = visible_job_or_404(request.user, public_id)
    metrics = selectors.job_metrics(job.directory, staging.job_metrics_path(job))
    columns = ["step", "time", *metrics.names]
    rows = ([row.get(column) for column in columns] for row in metrics.rows)
    return stream_csv(itertools.chain([columns], rows), f"metrics-{job.public_id}.csv")


def _draft(request: HttpRequest) -> tuple[JobSubmitForm, dict[str, list[str]]]:
    """The job form as being filled in: its values, and errors beyond the name and file."""
    form = _job_form.form_class(request.GET, user=request.user)
    form.is_valid()
    errors = {
        name: list(messages)
        for name, messages in form.errors.items()
        if name not in ("name", "script", "__all__")
    }
    return form, errors


@never_cache
@login_required
@require_GET
def job_match(request: HttpRequest) -> JsonResponse:
    """The live count beside the form's GPU fields: what in the pool fits this request."""
    form, errors = _draft(request)
    if errors:
        return JsonResponse({"ok": False, "errors": errors}, status=400)
    spec = form.to_spec(name="match")
    try:
        answer = submission.job_match_answer(user=request.user, spec=spec)
    except specs.JobSubmissionError as exc:
        return JsonResponse({"ok": False, "errors": {exc.field: [exc.message]}}, status=400)
    if answer is None:
        return JsonResponse({"ok": False, "pool_down": True}, status=503)
    return JsonResponse({"ok": True, **answer})


@login_required
@require_GET
def job_outputs_zip(request: HttpRequest, public_id) -> StreamingHttpResponse:
    return readouts.outputs_zip_response(visible_job_or_404(request.user, public_id))


@never_cache
@login_required
@require_GET
def job_preview(request: HttpRequest) -> HttpResponse:
    """Advanced: the submit description the form's values would produce."""
    form, errors = _draft(request)
    if errors:
        lines = [f"{name}: {' '.join(messages)}" for name, messages in errors.items()]
        return HttpResponse("\n".join(lines), status=400, content_type="text/plain")
    try:
        text = submission.job_preview_description(
            user=request.user,
            spec=form.to_spec(name=form.cleaned_data.get("name") or "preview"),
            uploaded_name=request.GET.get("script_name") or "train.py",
        )
    except specs.JobSubmissionError as exc:
        return HttpResponse(f"{exc.field}: {exc.message}", status=400, content_type="text/plain")
    return HttpResponse(text, content_type="text/plain; charset=utf-8")
