"""How the portal logs (settings.LOGGING): one console handler on standard error, as text or
JSON lines, with the request's and job's ids and the kit's expected "not yet" answers left out.
The table lives apart from the settings that choose its format and level."""

from __future__ import annotations


def logging_config(*, log_format: str, level: str) -> dict:
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "context": {"()": "portal.logcontext.ContextFilter"},
            "expected": {"()": "plumbing.quiet.QuietExpectedAnswers"},
        },
        "formatters": {
            "text": {
                "format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s %(job_id)s] "
                "%(message)s"
            },
            "json": {
                "()": "pythonjsonlogger.json.JsonFormatter",
                "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(job_id)s",
                "datefmt": "%Y-%m-%dT%H:%M:%S%z",
                "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
            },
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": log_format,
                "filters": ["context", "expected"],
            },
        },
        "root": {"handlers": ["console"], "level": level},
    }
