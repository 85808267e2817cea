"""The floor under a status poll: gunicorn with a WSGI app that answers every request 304 at
once, served as `make run` serves the portal. bench/status_polls.py measures its CPU per
request beside the portal's, so that what the portal itself adds is plain."""


def application(environ, start_response):
    start_response("304 Not Modified", [("ETag", '"floor"')])
    return []
