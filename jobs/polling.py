"""What an open job page's poll costs when nothing has changed.

The page asks every two seconds; with a whole class watching, most polls find nothing new.
The status document's ETag is made from what the document is built from, without building
it: the job's row and its newest event (hashed by PostgreSQL in one query, with the viewer's
row and whether their session still holds), its logs (size and change time, and the offsets
the page will ask from next), its output files, and what this viewer's document says beyond
the job (what they may do, their schedd's problem).

A poll that sends that ETag back is answered 304 by `StatusPollMiddleware`, ahead of the
session, the user and the view: the view leaves, per session and job, where to look (the
job's and viewer's rows, the log and output paths, a digest of the viewer's context), and
the middleware checks those in one query, one Redis read and a few `stat` calls. When only
the logs grew, which is what a training job mostly does, the middleware sends the owner's
page just the new log text (`logs_only`), if the page asked for that (PARTIAL_HEADER).
Anything it cannot vouch for (no such note, a session gone, a viewer not the owner, a
schedd not answering, anything but the logs changed) goes on to the view, which answers
with the whole document as it always did.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.core.exceptions import MiddlewareNotUsed
from django.db import connection
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified, JsonResponse
from django.urls import reverse
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.utils.http import parse_etags, quote_etag

from .models import Job, JobEvent
from .schedulers import UNANSWERING_KEY
from .selectors import job_log_chunk, kept_paths

# How long a viewer's note stands without a full answer: a change of their role (a lead
# removed from the lab) shows in the buttons within this time; everything the job shows,
# at once.
NOTE_TTL_S = 300
# Notes are pickled PollNotes: a release that changes PollNote's fields changes the version,
# so that no process reads a note another release wrote.
NOTE_PREFIX = "jobs:poll:v1:"
# What a page sends to say it can take an answer with only the logs (static/js/job_detail.js).
PARTIAL_HEADER = "X-Nightshift-Partial"
DB_SESSION_ENGINES = (
    "django.contrib.sessions.backends.db",
    "django.contrib.sessions.backends.cached_db",
)


@functools.cache
def _state_sql() -> str:
    quote = connection.ops.quote_name
    job, event = quote(Job._meta.db_table), quote(JobEvent._meta.db_table)
    user, session = quote(get_user_model()._meta.db_table), quote(Session._meta.db_table)
    # md5 of a whole row's text changes with any column; the newest event's id says whether
    # there is another (events are only ever added).
    return f"""
        SELECT md5(j::text), (SELECT max(e.id) FROM {event} e WHERE e.job_id = j.id),
            md5(u::text), EXISTS (SELECT 1 FROM {session} s WHERE s.session_key = %s
            AND s.expire_date > now()), j.owner_id = u.id
        FROM {job} j, {user} u WHERE j.id = %s AND u.id = %s
    """  # noqa: S608 - table names from the models; every value is a parameter


def stored_state(*, job_pk: int, user_pk: int, session_key: str) -> tuple | None:
    """(job row digest, newest event, viewer row digest, session valid, viewer owns the job),
    or None if the job or the viewer is gone."""
    with connection.cursor() as cursor:
        cursor.execute(_state_sql(), [session_key, job_pk, user_pk])
        return cursor.fetchone()


def requested_offsets(query: Mapping[str, str], streams) -> dict[str, int]:
    """The offset the page asks each log from (0 for anything not a number)."""
    offsets = {}
    for stream in streams:
        try:
            offsets[stream] = int(query.get(f"{stream}_offset", 0))
        except ValueError:
            offsets[stream] = 0
    return offsets


def context_digest(context: tuple) -> str:
    """What else this viewer's document depends on (permissions, a schedd's problem), each
    part's repr stable."""
    return hashlib.blake2b(repr(context).encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class LogStamp:
    size: int
    stamp: str


def _stamp(path: str | Path) -> LogStamp:
    try:
        found = os.lstat(path)
    except OSError:
        return LogStamp(0, "-")
    return LogStamp(found.st_size, f"{found.st_size}:{found.st_mtime_ns}:{found.st_mode}")


def _add_tree(digest, top: str) -> None:
    """Every entry under an output path, as job_output_files walks it (links not followed)."""
    digest.update(f"{top}:{_stamp(top).stamp}".encode())
    if os.path.islink(top) or not os.path.isdir(top):
        return
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames) + dirnames:
            path = os.path.join(dirpath, name)
            digest.update(f"{path}:{_stamp(path).stamp}".encode())


class StatusPoll:
    """One look at everything a job's status document is built from, taken before the
    document is read, so that a change made while it is read shows in the next poll."""

    def __init__(
        self, state: tuple, *, logs: Mapping[str, str], roots: list[str], context: str
    ) -> None:
        digest = hashlib.blake2b(repr((state[:3], context)).encode(), digest_size=16)
        for root in roots:
            _add_tree(digest, root)
        self.state = digest.hexdigest()
        self.logs = {stream: _stamp(path) for stream, path in sorted(logs.items())}

    def etag(self, offsets: Mapping[str, int]) -> str:
        """The quoted ETag of the document for a page that asks from `offsets` next."""
        parts = repr([(s, st.stamp, offsets.get(s)) for s, st in self.logs.items()])
        logs = hashlib.blake2b(parts.encode(), digest_size=8).hexdigest()
        return quote_etag(f"{self.state}.{logs}")

    def read_to_the_end(self, offsets: Mapping[str, int]) -> bool:
        """Whether a page at `offsets` has every log byte there was when this look was taken
        (a capped chunk leaves more to send)."""
        return all(offsets.get(s, 0) >= stamp.size for s, stamp in self.logs.items())

    def same_state(self, etags: list[str]) -> bool:
        """Whether one of `etags` was given while everything but the logs was as it is now."""
        return any(tag.strip('"').split(".")[0] == self.state for tag in etags)

    def next_etag(self, asked: Mapping[str, int], logs: Mapping[str, dict]) -> str:
        """The ETag of an answer that sent `logs` to a page that asked from `asked`: the
        page asks next from where the logs leave it, and that poll is a 304 if nothing
        changes, unless a log was cut short, with more to send."""
        read_to = {stream: chunk["offset"] for stream, chunk in logs.items()}
        return self.etag(read_to if self.read_to_the_end(read_to) else asked)


def log_chunks(root: Path, logs: Mapping[str, str | Path], offsets: Mapping[str, int]) -> dict:
    """Each log's text from where the page asked (never more than a chunk; links refused)."""
    chunks = {}
    for stream, path in logs.items():
        chunk = job_log_chunk(root, Path(path), offsets[stream])
        chunks[stream] = {
            "text": chunk.text,
            "start": chunk.start,
            "offset": chunk.offset,
            "size": chunk.size,
        }
    return chunks


@dataclass(frozen=True)
class PollNote:
    """What the view leaves for the middleware, per session and job."""

    job_pk: int
    user_pk: int
    schedd: str
    root: str
    logs: dict[str, str]
    roots: list[str]
    context: str

    def look(self, state: tuple) -> StatusPoll:
        return StatusPoll(state, logs=self.logs, roots=self.roots, context=self.context)


def _note_key(session_key: str, public_id: str) -> str:
    mixed = hashlib.blake2b(f"{session_key}:{public_id}".encode(), digest_size=16)
    return NOTE_PREFIX + mixed.hexdigest()


def note_for(job: Job, *, user_pk: int, logs: Mapping[str, Path], context: tuple) -> PollNote:
    return PollNote(
        job_pk=job.pk,
        user_pk=user_pk,
        schedd=job.schedd,
        root=str(job.directory),
        logs={stream: str(path) for stream, path in logs.items()},
        roots=[str(job.directory / name) for name in kept_paths(job)],
        context=context_digest(context),
    )


def look_now(note: PollNote, session_key: str) -> StatusPoll:
    """The view's look: the same query the middleware makes (a vanished row looks new)."""
    state = stored_state(job_pk=note.job_pk, user_pk=note.user_pk, session_key=session_key)
    return note.look(state or (uuid.uuid4().hex, None, None, False))


def remember(session_key: str | None, public_id, note: PollNote) -> None:
    if session_key and fast_path_enabled():
        cache.set(_note_key(session_key, str(public_id)), note, NOTE_TTL_S)


def fast_path_enabled() -> bool:
    return settings.SESSION_ENGINE in DB_SESSION_ENGINES


class StatusPollMiddleware:
    """Answers a job page's status poll before the session, the user and the view are
    loaded, when all it needs is a 304 or, for the owner's page, the logs' new text; any
    other poll goes on to the view."""

    def __init__(self, get_response) -> None:
        if not fast_path_enabled():
            raise MiddlewareNotUsed("sessions are not in the database")
        self.get_response = get_response
        sample = uuid.UUID(int=0)
        prefix, suffix = reverse("jobs:status", args=[sample]).split(str(sample))
        self.path = re.compile(
            re.escape(prefix)
            + r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
            + re.escape(suffix)
        )

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.answer(request) or self.get_response(request)

    def answer(self, request: HttpRequest) -> HttpResponse | None:
        if request.method != "GET":
            return None
        match = self.path.fullmatch(request.path_info)
        sent = request.META.get("HTTP_IF_NONE_MATCH")
        session_key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
        if match is None or not sent or not session_key:
            return None
        key = _note_key(session_key, match.group(1))
        found = cache.get_many([key, UNANSWERING_KEY])
        note = found.get(key)
        if not isinstance(note, PollNote) or note.schedd in (found.get(UNANSWERING_KEY) or {}):
            return None
        state = stored_state(job_pk=note.job_pk, user_pk=note.user_pk, session_key=session_key)
        if state is None or not state[3]:
            return None
        look = note.look(state)
        offsets = requested_offsets(request.GET, note.logs)
        etag = look.etag(offsets)
        etags = parse_etags(sent)
        if etag in etags:
            response = HttpResponseNotModified()
        elif state[4] and request.headers.get(PARTIAL_HEADER) == "logs" and look.same_state(etags):
            logs = log_chunks(Path(note.root), note.logs, offsets)
            etag = look.next_etag(offsets, logs)
            response = JsonResponse({"logs_only": True, "logs": logs})
        else:
            return None
        response["ETag"] = etag
        patch_cache_control(response, private=True, no_cache=True)
        patch_vary_headers(response, ("Cookie", PARTIAL_HEADER))
        return response
