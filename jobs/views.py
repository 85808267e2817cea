from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from . import selectors, services
from .bridge import get_bridge
from .forms import JobSubmitForm
from .models import Job


def _own_job(request: HttpRequest, public_id) -> Job:
    try:
        return selectors.job_get_for_user(request.user, public_id)
    except Job.DoesNotExist:
        raise Http404("No such job.") from None


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = selectors.job_list_for_user(request.user)[:200]
    return render(request, "jobs/list.html", {"jobs": jobs})


@login_required
def job_new(request: HttpRequest) -> HttpResponse:
    form = JobSubmitForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        spec = services.JobSpec(
            name=data["name"],
            arguments=form.arguments_list(),
            gpus=data["gpus"],
            gpu_memory_gb=data["gpu_memory_gb"],
            cpus=data["cpus"],
            memory_mb=round(data["memory_gb"] * 1024),
            max_runtime_s=form.max_runtime_s(),
        )
        try:
            job = services.job_submit(user=request.user, spec=spec, script=data["script"])
        except services.JobSubmissionError as exc:
            field = {
                "script_name": "script",
                "memory_mb": "memory_gb",
                "max_runtime_s": "max_runtime_minutes",
            }.get(exc.field, exc.field)
            form.add_error(field if field in form.fields else None, exc.message)
        else:
            messages.success(request, f"“{job.name}” is on its way to the pool.")
            return redirect("jobs:detail", public_id=job.public_id)
    return render(request, "jobs/new.html", {"form": form}, status=400 if form.errors else 200)


@login_required
def job_detail(request: HttpRequest, public_id) -> HttpResponse:
    job = _own_job(request, public_id)
    return render(
        request,
        "jobs/detail.html",
        {
            "job": job,
            "events": job.events.all(),
            "outputs": selectors.job_output_files(job),
        },
    )


@never_cache
@login_required
@require_GET
def job_status(request: HttpRequest, public_id) -> JsonResponse:
    """Everything the job page refreshes while it is open."""
    job = _own_job(request, public_id)
    logs = {}
    for stream, path in services.job_logs_for(job).items():
        try:
            offset = int(request.GET.get(f"{stream}_offset", 0))
        except ValueError:
            offset = 0
        text, next_offset = selectors.job_log_chunk(path, offset)
        logs[stream] = {"text": text, "offset": next_offset}
    return JsonResponse(
        {
            "state": job.state,
            "state_label": job.get_state_display(),
            "status_detail": job.status_detail,
            "hold_reason": job.hold_reason,
            "match_problem": job.match_problem,
            "wait_reason": job.wait_reason,
            "hold_title": job.hold_explanation.title if job.hold_explanation else "",
            "hold_advice": job.hold_explanation.advice if job.hold_explanation else "",
            "exit_code": job.exit_code,
            "exit_signal": job.exit_signal,
            "workstation": job.workstation,
            "num_starts": job.num_starts,
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
        }
    )


@login_required
@require_GET
def job_log(request: HttpRequest, public_id, stream: str) -> HttpResponse:
    job = _own_job(request, public_id)
    path = services.job_logs_for(job).get(stream)
    if path is None or not path.is_file():
        raise Http404("This log does not exist yet.")
    # FileResponse closes the file when the response is done.
    response = FileResponse(open(path, "rb"), content_type="text/plain; charset=utf-8")  # noqa: SIM115
    response["Content-Disposition"] = f'inline; filename="{stream}.txt"'
    return response


@login_required
@require_GET
def job_output(request: HttpRequest, public_id, path: str) -> FileResponse:
    job = _own_job(request, public_id)
    file_path = selectors.job_output_path(job, path)
    if file_path is None:
        raise Http404("No such output file.")
    return FileResponse(open(file_path, "rb"), as_attachment=True, filename=file_path.name)


@login_required
@require_POST
def job_cancel(request: HttpRequest, public_id) -> HttpResponse:
    job = _own_job(request, public_id)
    try:
        services.job_cancel(job=job, user=request.user)
    except services.JobActionError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, "Cancelling the job.")
    return redirect("jobs:detail", public_id=job.public_id)


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
        from portal.celery import app

        replies = app.control.ping(timeout=1.0) or []
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
