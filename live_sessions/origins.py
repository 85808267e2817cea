"""What a job's pages may do in a browser: the origin they are served on, which origins
and hosts reach them, and which of a job's response headers the browser gets. A job is
hostile to its visitors and to every other job; the live proxy (live_sessions.proxy)
applies this to every request and answer."""

from __future__ import annotations

from django.conf import settings

# What a job may never say to a browser. Each of these acts beyond the job's own pages:
# cookies ignore ports (and paths isolate nothing from a page of the same origin); a
# service worker's scope, site data, HSTS, key pins, alternative services and reporting
# belong to a whole origin or host; credentialed CORS would let another site read the
# job's pages with its visitor's cookie. The proxy's own framing policy replaces the rest.
FROM_JOB_DROPPED = frozenset(
    {
        "set-cookie",
        "set-cookie2",
        "service-worker-allowed",
        "clear-site-data",
        "strict-transport-security",
        "public-key-pins",
        "public-key-pins-report-only",
        "expect-ct",
        "alt-svc",
        "nel",
        "report-to",
        "reporting-endpoints",
        "origin-trial",
        "access-control-allow-credentials",
        "x-frame-options",
        "content-security-policy",
        "content-security-policy-report-only",
        "supports-loading-mode",
        "refresh",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "upgrade",
        "trailer",
    }
)
# A served endpoint's pages on an origin shared by every job are sandboxed: an opaque
# origin, so its scripts reach no other job's pages, no cookie, no storage and no service
# worker. (On an origin of its own, NIGHTSHIFT_LIVE_URL with {job}, it needs none.)
SERVE_SANDBOX = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"


def origin_of(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


def per_job_origins() -> bool:
    return "{job}" in settings.LIVE_URL


def base_url_of(public_id: str) -> str:
    """Where the live proxy serves this job: NIGHTSHIFT_LIVE_URL, with {job} (a host name
    per job, so that one job's pages never share an origin with another's) filled in."""
    return settings.LIVE_URL.replace("{job}", public_id).rstrip("/")


def job_origin(public_id: str) -> str:
    """The origin the browser sees this job's pages on."""
    return origin_of(base_url_of(public_id)).lower()


def origin_allowed(headers: list[tuple[str, str]], public_id: str) -> bool:
    """A browser's request from a page of this job's own origin, or from no page (a
    program): a page elsewhere, another job's included when each has its own host, cannot
    drive a user's notebook (its WebSocket above all)."""
    expected = job_origin(public_id)
    return all(value.lower() == expected for name, value in headers if name == "origin")


def host_allowed(headers: list[tuple[str, str]], public_id: str) -> bool:
    """With a host per job, a job's paths answer on its own host alone: another job's
    host serving them would put both in one origin again."""
    if not per_job_origins():
        return True
    expected = job_origin(public_id).partition("://")[2]
    hosts = [value.lower() for name, value in headers if name == "host"]
    return bool(hosts) and all(host == expected for host in hosts)


def response_headers(raw_headers, *, service: str, prefix: str) -> list[tuple[bytes, bytes]]:
    """A job's answer's headers as the browser gets them: less what acts beyond the job's
    own pages, with the proxy's framing policy (and sandbox) in place of the job's."""
    out = []
    for name, value in raw_headers:
        lowered = name.decode("latin-1").lower()
        if lowered in FROM_JOB_DROPPED:
            continue
        if lowered == "location" and service == "serve" and value.startswith(b"/"):
            value = prefix.encode() + value  # the endpoint's own paths are under it
        out.append((name, value))
    # The portal's session page frames the service, and no other site may.
    policy = f"frame-ancestors 'self' {origin_of(settings.PORTAL_URL)}"
    if service == "serve" and not per_job_origins():
        policy = f"{SERVE_SANDBOX}; {policy}"
    out.append((b"content-security-policy", policy.encode()))
    return out
