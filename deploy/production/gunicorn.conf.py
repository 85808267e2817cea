"""gunicorn for nightshift-web.service. Values that must match nginx's site are marked."""

import multiprocessing
import os

# matches: the upstream in deploy/production/nginx/nightshift.conf
bind = os.environ.get("NIGHTSHIFT_WEB_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("NIGHTSHIFT_WEB_WORKERS", min(2 * multiprocessing.cpu_count(), 8)))
threads = int(os.environ.get("NIGHTSHIFT_WEB_THREADS", 4))
# matches: nginx's proxy_read_timeout (a large project archive is checked before the answer)
timeout = 300
graceful_timeout = 30
# matches: longer than keepalive_timeout in nginx's upstream (60 s). nginx keeps idle connections
# to gunicorn open for reuse; the side that closes one must be nginx, or a request nginx sends
# down a connection gunicorn is closing fails, and for a PATCH or POST, which nginx does not
# retry, the client gets a 502 (seen: a resumable upload's chunk, with gunicorn's 2 s default).
keepalive = 75
# A worker is replaced now and then, so that no slow leak grows for months.
max_requests = 2000
max_requests_jitter = 200
# nginx on the same host; it sets X-Forwarded-Proto.
forwarded_allow_ips = "127.0.0.1,::1"
# Request lines as JSON on standard output (the journal), with nginx's request id.
accesslog = "-"
access_log_format = (
    '{"time": "%(t)s", "logger": "gunicorn.access", "request_id": "%({x-request-id}i)s", '
    '"method": "%(m)s", "path": "%(U)s", "status": %(s)s, "bytes": "%(B)s", '
    '"duration_ms": %(M)s, "client": "%({x-forwarded-for}i)s"}'
)
errorlog = "-"
