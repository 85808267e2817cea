"""What every log line says about where it came from: the request's id (from nginx's
X-Request-ID, or a new one) and the job it concerns. Both are carried from a web request
into the Celery tasks it queues, so that one id follows a submission from the browser to the
schedd. NIGHTSHIFT_LOG_FORMAT=json makes each line one JSON object."""

from __future__ import annotations

import inspect
import logging
import re
import uuid
from contextvars import ContextVar

from django.http import HttpRequest, HttpResponse

request_id: ContextVar[str] = ContextVar("request_id", default="")
job_id: ContextVar[str] = ContextVar("job_id", default="")
REQUEST_ID_HEADER = "nightshift_request_id"
_VALID_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


class ContextFilter(logging.Filter):
    """Adds request_id and job_id to every record (a record's own extra= wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", ""):
            record.request_id = request_id.get()
        if not getattr(record, "job_id", ""):
            record.job_id = job_id.get()
        return True


class RequestIdMiddleware:
    """One id per request: nginx's, when it sent a sane one; answered as X-Request-ID."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        sent = request.headers.get("X-Request-ID", "")
        rid = sent if _VALID_REQUEST_ID.fullmatch(sent) else uuid.uuid4().hex
        request_token = request_id.set(rid)
        job_token = job_id.set("")
        try:
            response = self.get_response(request)
        finally:
            request_id.reset(request_token)
            job_id.reset(job_token)
        response["X-Request-ID"] = rid
        return response

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs) -> None:
        match = request.resolver_match
        if "public_id" in view_kwargs and match is not None and "sweep" not in match.view_name:
            job_id.set(str(view_kwargs["public_id"]))


def bind_job(public_id) -> None:
    """The rest of this request or task concerns this job."""
    job_id.set(str(public_id))


# -- Celery: the ids travel with the task -------------------------------------------------


def add_ids_to_task(headers: dict | None = None, **kwargs) -> None:
    if headers is not None and request_id.get():
        headers[REQUEST_ID_HEADER] = request_id.get()


def take_ids_from_task(task=None, args=None, kwargs=None, **extra) -> None:
    """Each task runs with the ids of the request that queued it, and its job's id."""
    sent = getattr(task.request, REQUEST_ID_HEADER, None) if task is not None else None
    tokens = (
        request_id.set(sent or (task.request.id if task is not None else "") or ""),
        job_id.set(""),
    )
    if task is not None:
        task.request.nightshift_log_tokens = tokens
    job_pk = (kwargs or {}).get("job_pk")
    if job_pk is None and args and task is not None:
        parameters = list(inspect.signature(task.run).parameters)
        if "job_pk" in parameters and parameters.index("job_pk") < len(args):
            job_pk = args[parameters.index("job_pk")]
    if job_pk is not None:
        from jobs.models import Job

        public_id = Job.objects.filter(pk=job_pk).values_list("public_id", flat=True).first()
        if public_id is not None:
            bind_job(public_id)


def drop_ids_after_task(task=None, **extra) -> None:
    """Back to the ids from before the task (none in a worker; the request's in a test that
    runs tasks in place)."""
    tokens = getattr(task.request, "nightshift_log_tokens", None) if task is not None else None
    if tokens is not None:
        request_token, job_token = tokens
        job_id.reset(job_token)
        request_id.reset(request_token)
