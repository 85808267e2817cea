"""Nightshift settings. Everything comes from the environment, through portal.env."""

import re
import sys
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from django.core.exceptions import ImproperlyConfigured

from portal import env as _env_module
from portal.beat import beat_schedule
from portal.env import (
    development_database_url,
    env_bool,
    env_choice,
    env_command,
    env_database,
    env_float,
    env_grid_intensity,
    env_int,
    env_list,
    env_month_days,
    env_names,
    env_networks,
    env_path,
    env_rate,
    env_str,
    env_url,
    env_url_prefix,
)
from portal.logging_config import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = env_path("NIGHTSHIFT_VAR_DIR", BASE_DIR / "var")
# What every web and worker process must see alike (datasets, model archives, uploads in
# progress, job folders): with more than one portal host, a shared file system's folder
# mounted at this same path on each (docs/operations.md, "More than one portal host").
SHARED_DIR = env_path("NIGHTSHIFT_SHARED_DIR", VAR_DIR)

DEBUG = env_bool("DEBUG", False)
# The default key only suits a portal on 127.0.0.1; production sets SECRET_KEY (or
# SECRET_KEY_FILE), and `check --deploy` refuses this one (portal/checks.py).
DEVELOPMENT_SECRET_KEY = "nightshift-local-development-key-change-me-in-production"  # noqa: S105
SECRET_KEY = env_str("SECRET_KEY", DEVELOPMENT_SECRET_KEY)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Reverse proxies in front of the portal (nginx: 1); their X-Forwarded-For is believed for
# the audit log's client address. 0 trusts none of it.
TRUSTED_PROXY_COUNT = env_int("NIGHTSHIFT_TRUSTED_PROXY_COUNT", 0, minimum=0)

# -- HTTPS and browser security ----------------------------------------------------------
# Production serves the portal over HTTPS only (NIGHTSHIFT_HTTPS=true): cookies are sent
# only over TLS, plain HTTP is redirected, and browsers are told to remember it (HSTS).
HTTPS = env_bool("NIGHTSHIFT_HTTPS", False)
if TRUSTED_PROXY_COUNT:
    # nginx terminates TLS and says so; only believed when a proxy is declared.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("NIGHTSHIFT_SSL_REDIRECT", HTTPS)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
SECURE_HSTS_SECONDS = env_int("NIGHTSHIFT_HSTS_SECONDS", 31_536_000 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("NIGHTSHIFT_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("NIGHTSHIFT_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content Security Policy (django-csp): scripts, styles and images from the portal itself
# only. No page has inline script or style; Chart.js and Swagger UI are served from static.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Form widgets' templates, found through TEMPLATES (FORM_RENDERER below).
    "django.forms",
    "django_celery_beat",
    "django_filters",
    "csp",
    "axes",
    "mozilla_django_oidc",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # Resumable dataset uploads (tus 1.0); its own Upload table stays empty (datasets').
    "rest_framework_tus",
    "accounts",
    "labs",
    "audit",
    "jobs",
    "experiments",
    "environments",
    "datasets",
    "live_sessions",
    "usage",
    "forecasts",
    "lending",
    "job_templates",
    "model_registry",
    "notifications",
    "accounting",
    "operations",
    "portal",
]

MIDDLEWARE = [
    "portal.logcontext.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # An open job page's unchanged status poll, answered 304 before sessions and users load.
    "jobs.polling.StatusPollMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "audit.middleware.AuditOriginMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Reads the tus headers of resumable uploads (datasets.uploads) into the request.
    "datasets.middleware.TusHeadersMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into its own answer.
    "axes.middleware.AxesMiddleware",
]

# Widgets render with templates/ too, where the admin's date and time inputs get labels.
FORM_RENDERER = "django.forms.renderers.TemplatesSetting"
ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context.registration",
                "operations.context.drain_banner",
            ],
        },
    },
]

# PostgreSQL only, as in every test. Unset, DATABASE_URL names `make run`'s cluster under
# var/postgres/ (deploy/dev/database), by its Unix socket, so manage.py finds it too.
DATABASES = {
    "default": env_database("DATABASE_URL", development_database_url(VAR_DIR / "postgres"))
}
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    # First: refuses any sign-in attempt from a locked-out username and address.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

# LDAP sign-in (django-auth-ldap): on when a server URI is set. Users are found under
# NIGHTSHIFT_LDAP_USER_BASE; with NIGHTSHIFT_LDAP_GROUP_BASE, a lab's "LDAP group" makes its
# members members of the lab.
LDAP_ENABLED = bool(env_str("NIGHTSHIFT_LDAP_URI", ""))
if LDAP_ENABLED:
    import ldap
    from django_auth_ldap.config import GroupOfNamesType, LDAPSearch

    AUTH_LDAP_SERVER_URI = env_str("NIGHTSHIFT_LDAP_URI", "")
    AUTH_LDAP_BIND_DN = env_str("NIGHTSHIFT_LDAP_BIND_DN", "")
    AUTH_LDAP_BIND_PASSWORD = env_str("NIGHTSHIFT_LDAP_BIND_PASSWORD", "")
    AUTH_LDAP_START_TLS = env_bool("NIGHTSHIFT_LDAP_START_TLS", False)
    AUTH_LDAP_USER_SEARCH = LDAPSearch(
        env_str("NIGHTSHIFT_LDAP_USER_BASE", ""),
        ldap.SCOPE_SUBTREE,
        env_str("NIGHTSHIFT_LDAP_USER_FILTER", "(uid=%(user)s)"),
    )
    AUTH_LDAP_USER_ATTR_MAP = {"first_name": "givenName", "last_name": "sn", "email": "mail"}
    if env_str("NIGHTSHIFT_LDAP_GROUP_BASE", ""):
        AUTH_LDAP_GROUP_SEARCH = LDAPSearch(
            env_str("NIGHTSHIFT_LDAP_GROUP_BASE", ""),
            ldap.SCOPE_SUBTREE,
            "(objectClass=groupOfNames)",
        )
        AUTH_LDAP_GROUP_TYPE = GroupOfNamesType()
    AUTHENTICATION_BACKENDS.insert(1, "django_auth_ldap.backend.LDAPBackend")

# Campus single sign-on with OpenID Connect: on when a client id is set. The provider's
# endpoints are in its /.well-known/openid-configuration.
OIDC_RP_CLIENT_ID = env_str("NIGHTSHIFT_OIDC_CLIENT_ID", "")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
OIDC_RP_CLIENT_SECRET = env_str("NIGHTSHIFT_OIDC_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("NIGHTSHIFT_OIDC_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env_str("NIGHTSHIFT_OIDC_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = env_str("NIGHTSHIFT_OIDC_USERINFO_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env_str("NIGHTSHIFT_OIDC_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = env_str("NIGHTSHIFT_OIDC_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = "openid email profile"
# Providers name their signing keys (kid); one with a single unnamed key needs this off.
OIDC_VERIFY_KID = env_bool("NIGHTSHIFT_OIDC_VERIFY_KID", True)
OIDC_PROVIDER_NAME = env_str("NIGHTSHIFT_OIDC_PROVIDER_NAME", "campus account")
OIDC_AUTHENTICATE_CLASS = "accounts.oidc.CampusAuthenticationRequestView"
OIDC_CALLBACK_CLASS = "accounts.oidc.CampusAuthenticationCallbackView"
if OIDC_ENABLED:
    for _name in ("AUTHORIZATION", "TOKEN", "USERINFO", "JWKS"):
        if not env_str(f"NIGHTSHIFT_OIDC_{_name}_ENDPOINT", ""):
            raise ImproperlyConfigured(
                f"NIGHTSHIFT_OIDC_{_name}_ENDPOINT must be set with NIGHTSHIFT_OIDC_CLIENT_ID"
            )
    AUTHENTICATION_BACKENDS.append("accounts.oidc.CampusOIDCBackend")
# Brute force: after this many failed sign-ins for one username from one address, that
# pair is locked out for the cool-off time (web form, admin and the API's password route).
AXES_FAILURE_LIMIT = env_int("NIGHTSHIFT_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("NIGHTSHIFT_LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "accounts.lockout.lockout_response"
AXES_CLIENT_IP_CALLABLE = "audit.middleware.client_ip"
AXES_VERBOSE = False
# Self-registration: open (anyone may submit at once), approval (an admin or a lead of
# the lab they ask to join approves them first) or closed (admins create accounts).
REGISTRATION_MODE = env_choice(
    "NIGHTSHIFT_REGISTRATION", "approval", ("open", "approval", "closed")
)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "jobs:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# collectstatic's target, which nginx serves (a container image fills it when it is built).
STATIC_ROOT = env_path("NIGHTSHIFT_STATIC_ROOT", VAR_DIR / "staticfiles")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

# -- Celery ------------------------------------------------------------------------------
REDIS_URL = env_url("REDIS_URL", "redis://127.0.0.1:6379/0", schemes=("redis", "rediss"))
CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A task that a killed worker had taken comes back after this many seconds.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 120, minimum=10)
}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
JOB_SYNC_INTERVAL = env_float("NIGHTSHIFT_SYNC_INTERVAL", 3.0, minimum=0.5)
# How often hyperparameter studies tell Optuna what their trials did and start new ones.
STUDY_INTERVAL_S = env_float("NIGHTSHIFT_STUDY_INTERVAL_S", 10.0, minimum=1.0)
# How often the pool's GPUs are sampled for utilization and harvest reports.
CAPACITY_SAMPLE_INTERVAL_S = env_int("NIGHTSHIFT_CAPACITY_SAMPLE_S", 300, minimum=10)
# How often each running job's usage (CPU, memory, disk, GPUs) is sampled, in one schedd
# query; and how long the samples of a finished job are kept (its summary stays).
USAGE_SAMPLE_INTERVAL_S = env_int("NIGHTSHIFT_USAGE_SAMPLE_S", 30, minimum=2)
USAGE_SAMPLE_RETENTION_DAYS = env_int("NIGHTSHIFT_USAGE_RETENTION_DAYS", 90, minimum=1)
# A job measured for less than this earns no advice: too little evidence.
USAGE_ADVICE_MIN_S = env_int("NIGHTSHIFT_USAGE_ADVICE_MIN_S", 60, minimum=1)
# For jobs' CO2e: g/kWh, or a CSV by hour (_FILE); unset, kWh alone (env_grid_intensity).
GRID_INTENSITY = env_grid_intensity("NIGHTSHIFT_GRID_INTENSITY", ZoneInfo(TIME_ZONE))
# When the campus's terms start (MM-DD): owners see what their workstation gave per term.
TERM_STARTS = env_month_days("NIGHTSHIFT_TERM_STARTS", "01-01,05-01,09-01")
# How far back each night's availability forecasts look (capacity samples, by workstation).
FORECAST_HISTORY_DAYS = env_int("NIGHTSHIFT_FORECAST_HISTORY_DAYS", 56, minimum=1)
# How often every waiting job's start is predicted again.
START_PREDICTION_INTERVAL_S = env_int("NIGHTSHIFT_START_PREDICTION_S", 60, minimum=10)
# The longest window a lab lead may reserve workstations for, and how far ahead.
RESERVATION_MAX_HOURS = env_int("NIGHTSHIFT_RESERVATION_MAX_HOURS", 72, minimum=1)
RESERVATION_AHEAD_DAYS = env_int("NIGHTSHIFT_RESERVATION_AHEAD_DAYS", 60, minimum=1)
CELERY_BEAT_SCHEDULE = beat_schedule(
    sync_s=JOB_SYNC_INTERVAL,
    study_s=STUDY_INTERVAL_S,
    usage_sample_s=USAGE_SAMPLE_INTERVAL_S,
    start_prediction_s=START_PREDICTION_INTERVAL_S,
    capacity_sample_s=CAPACITY_SAMPLE_INTERVAL_S,
)

# -- HTCondor ------------------------------------------------------------------------------
CONDOR_BRIDGE = env_choice("NIGHTSHIFT_BRIDGE", "htcondor", ("htcondor", "fake"))
CONDOR_COLLECTOR = env_str("CONDOR_COLLECTOR", "127.0.0.1:9618")
CONDOR_SCHEDD_NAME = env_str("CONDOR_SCHEDD_NAME", "") or None
CONDOR_TOKEN_DIR = env_path("CONDOR_TOKEN_DIR", VAR_DIR / "condor-tokens")
CONDOR_FILE_MODE = env_choice("CONDOR_FILE_MODE", "shared", ("shared", "spool"))
# Several access points: the schedds jobs may go to, by their collector names, or "discover"
# for every schedd the collector knows. Empty: CONDOR_SCHEDD_NAME alone (or the collector's
# only schedd). SCHEDD_POLICY picks one for each job: the schedd with the fewest of the
# portal's unfinished jobs, or the one its lab names (labs that name none: the least loaded).
# condor_bridge.types.SCHEDD_NAME_PATTERN, which the settings may not import (a test keeps
# the two the same).
SCHEDD_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,199}")
CONDOR_DISCOVER_SCHEDDS = env_str("CONDOR_SCHEDDS", "") == "discover"
CONDOR_SCHEDDS = (
    []
    if CONDOR_DISCOVER_SCHEDDS
    else env_names(
        "CONDOR_SCHEDDS", SCHEDD_NAME_PATTERN, what="schedd name (letters, digits, . _ @ -)"
    )
)
SCHEDD_POLICY = env_choice("NIGHTSHIFT_SCHEDD_POLICY", "least-loaded", ("least-loaded", "per-lab"))
# The schedds that are not on a file system shared with the portal (remote access points):
# their jobs' files travel with HTCondor's spool, whatever CONDOR_FILE_MODE says.
CONDOR_SPOOL_SCHEDDS = env_names(
    "CONDOR_SPOOL_SCHEDDS", SCHEDD_NAME_PATTERN, allowed=CONDOR_SCHEDDS or None, what="schedd name"
)
# Tags every job this portal submits, so that several portals can share one pool.
NIGHTSHIFT_INSTANCE = env_str("NIGHTSHIFT_INSTANCE", "default")
# Shared by every web process, so that API rate limits hold across gunicorn workers.
CACHES = {
    "default": {
        # Django's, sharing one Redis client per connection pool (plumbing/cache.py).
        "BACKEND": "plumbing.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": f"nightshift-{NIGHTSHIFT_INSTANCE}",
    }
}
# The python3 on the execute workstations that runs a training script.
JOB_PYTHON = env_str("NIGHTSHIFT_JOB_PYTHON", "/usr/bin/python3")

# -- Software environments -----------------------------------------------------------------
# The Python version environments are locked for unless they say otherwise: the version of
# the workstations' JOB_PYTHON (3.13 in the personal pool's Debian trixie root).
ENVIRONMENT_PYTHON_VERSION = env_str("NIGHTSHIFT_ENVIRONMENT_PYTHON_VERSION", "3.13")
if not re.fullmatch(r"3\.\d{1,2}", ENVIRONMENT_PYTHON_VERSION):
    raise ImproperlyConfigured("NIGHTSHIFT_ENVIRONMENT_PYTHON_VERSION must look like 3.13")
# A campus package mirror (a PEP 503 "simple" index URL); empty: pypi.org. Locks are resolved
# against it, and jobs install from it (the personal pool passes it to the workstations).
PACKAGE_INDEX_URL = env_str("NIGHTSHIFT_PACKAGE_INDEX_URL", "")
if PACKAGE_INDEX_URL:
    env_url("NIGHTSHIFT_PACKAGE_INDEX_URL", "", schemes=("https", "http"))
# What a requirements list may reach beyond the index: index (index options and direct
# URLs), vcs (git+... and -e of them), local (paths and file: URLs). Empty: packages only.
REQUIREMENTS_ALLOW = env_list("NIGHTSHIFT_REQUIREMENTS_ALLOW", [])
if set(REQUIREMENTS_ALLOW) - {"index", "vcs", "local"}:
    raise ImproperlyConfigured("NIGHTSHIFT_REQUIREMENTS_ALLOW takes index, vcs and local")
# uv resolves requirements into locks on the portal: the one installed beside this Python.
_UV = Path(sys.executable).with_name("uv")
ENVIRONMENT_UV = env_str("NIGHTSHIFT_UV", str(_UV) if _UV.exists() else "uv")
ENVIRONMENT_UV_CACHE_DIR = env_path("NIGHTSHIFT_UV_CACHE_DIR", VAR_DIR / "uv-cache")
ENVIRONMENT_LOCK_TIMEOUT_S = env_int("NIGHTSHIFT_LOCK_TIMEOUT_S", 120, minimum=5)
# The site's notebook environment (manage.py notebook_environment): requirements, one a line.
NOTEBOOK_REQUIREMENTS = env_str("NIGHTSHIFT_NOTEBOOK_REQUIREMENTS", "").replace("\\n", "\n")

# -- Datasets ------------------------------------------------------------------------------
# Each dataset version is kept once, as one content-addressed archive under this folder.
DATASETS_DIR = env_path("NIGHTSHIFT_DATASETS_DIR", SHARED_DIR / "datasets")
DATASET_MAX_FILES = env_int("NIGHTSHIFT_DATASET_MAX_FILES", 200_000, minimum=1)
DATASET_MAX_GB = env_float("NIGHTSHIFT_DATASET_MAX_GB", 200.0, minimum=0.001)
# Folders on a shared file system that every workstation mounts at the same path; a dataset
# may be registered from inside one of them (and is linked into jobs, never copied).
DATASET_ROOTS = [Path(root) for root in env_list("NIGHTSHIFT_DATASET_ROOTS", [])]
# Networks a dataset URL may point into beyond the public internet (a campus file server,
# say); plain http:// is accepted only for these. Empty: public addresses, over https, only.
DATASET_URL_ALLOW = env_networks("NIGHTSHIFT_DATASET_URL_ALLOW", [])
# Where workstations fetch datasets from (the portal as they reach it); empty: PORTAL_URL.
DATASET_DELIVERY_URL = env_str("NIGHTSHIFT_DATASET_DELIVERY_URL", "")
if DATASET_DELIVERY_URL:
    env_url("NIGHTSHIFT_DATASET_DELIVERY_URL", "", schemes=("http", "https"))
# Behind nginx, dataset archives are sent by nginx from this internal location, which maps
# to DATASETS_DIR/objects/ (X-Accel-Redirect, as for outputs). Empty: the portal sends them.
DATASET_ACCEL_REDIRECT_PREFIX = env_url_prefix(
    "NIGHTSHIFT_DATASET_ACCEL_REDIRECT_PREFIX", "/_nightshift_datasets/"
)
# What each user's own datasets may keep on the portal, in GB; empty: no limit. A lab's limit
# for the datasets shared with it is set on the lab, in the admin.
DATASET_QUOTA_GB = env_float("NIGHTSHIFT_DATASET_QUOTA_GB", None, minimum=0.0)
# A resumable upload not finished this long after it began is removed with its bytes.
DATASET_UPLOAD_EXPIRES_HOURS = env_int("NIGHTSHIFT_DATASET_UPLOAD_EXPIRES_HOURS", 24, minimum=1)
REST_FRAMEWORK_TUS = {
    "UPLOAD_MODEL": "datasets.DatasetUpload",
    "UPLOAD_EXPIRES": timedelta(hours=DATASET_UPLOAD_EXPIRES_HOURS),
    "SAVE_HANDLER_CLASS": "datasets.uploads.ImportWhenComplete",
    "MAX_FILE_SIZE": int(DATASET_MAX_GB * 2**30),
    "FILENAME_METADATA_FIELD": "filename",
}
# A job's credential for its datasets is good while the job has not ended, and at most this
# long after it was submitted.
DATASET_CREDENTIAL_MAX_AGE_S = env_int(
    "NIGHTSHIFT_DATASET_CREDENTIAL_MAX_AGE_S", 14 * 24 * 3600, minimum=60
)
for _root in DATASET_ROOTS:
    if not _root.is_absolute():
        raise ImproperlyConfigured(f"NIGHTSHIFT_DATASET_ROOTS: {_root} is not an absolute path")

# -- Jobs ----------------------------------------------------------------------------------
JOBS_DIR = env_path("NIGHTSHIFT_JOBS_DIR", SHARED_DIR / "jobs")
# In the shared-file-system mode jobs run as the pool's account, which must own job folders.
JOB_DIR_UID = env_int("NIGHTSHIFT_JOB_DIR_UID", None, minimum=1)
MAX_SCRIPT_MB = env_int("NIGHTSHIFT_MAX_SCRIPT_MB", 10, minimum=1)
# Project archives: the upload, and what it may expand to.
MAX_UPLOAD_MB = env_int("NIGHTSHIFT_MAX_UPLOAD_MB", 512, minimum=1)
ARCHIVE_MAX_FILES = env_int("NIGHTSHIFT_ARCHIVE_MAX_FILES", 10_000, minimum=1)
ARCHIVE_MAX_EXPANDED_MB = env_int("NIGHTSHIFT_ARCHIVE_MAX_EXPANDED_MB", 2048, minimum=1)
# Behind nginx (deploy/production/nginx/nightshift.conf), output downloads are handed to
# nginx once the portal has checked who may read them: the response names the file under
# this internal location (X-Accel-Redirect) and nginx sends the bytes, so that a 5 GB
# checkpoint never passes through a Python worker. Empty: the portal sends them itself.
ACCEL_REDIRECT_PREFIX = env_url_prefix("NIGHTSHIFT_ACCEL_REDIRECT_PREFIX", "/_jobfiles/")
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
# Checkpoints (see jobs/runtime/nightshift.py): the time between SIGTERM and SIGKILL when a
# workstation's owner comes back (match the execute nodes' NIGHTSHIFT_VACATE_GRACE_SECONDS),
# how often the helper checkpoints unasked, and how many starts a job gets before it is held.
# How long HTCondor tries to reconnect to a running job it lost touch with (a restart)
# before it runs the job again; empty: HTCondor's default, 2400 s.
JOB_LEASE_S = env_int("NIGHTSHIFT_JOB_LEASE_S", None, minimum=20)
CHECKPOINT_GRACE_S = env_int("NIGHTSHIFT_CHECKPOINT_GRACE_S", 300, minimum=1)
# Without a shared file system only checkpoints taken while running reach the next
# workstation (a SIGTERM-time save does not travel), so spool mode checkpoints more often.
CHECKPOINT_INTERVAL_S = env_int(
    "NIGHTSHIFT_CHECKPOINT_INTERVAL_S", 600 if CONDOR_FILE_MODE == "spool" else 3600, minimum=0
)
# HTCondor's own backstop, which counts every start, progress or not.
MAX_JOB_STARTS = env_int("NIGHTSHIFT_MAX_STARTS", 50, minimum=0, maximum=1000)
# The portal's guard (shared mode): evicted this many times in a row without a checkpoint.
MAX_EVICTIONS_WITHOUT_PROGRESS = env_int("NIGHTSHIFT_MAX_EVICTIONS_WITHOUT_PROGRESS", 5, minimum=0)
# A queued job that no submission task has touched for this long lost its task (Redis
# restarted, say) and is sent again; exactly-once adoption makes that safe. Longer than
# the submit task's longest retry wait (60 s), so that retrying jobs are left alone.
RESUBMIT_AFTER_S = env_int("NIGHTSHIFT_RESUBMIT_AFTER_S", 120, minimum=5)
# The pool counts as not matching when an idle job waits this long while a workstation that
# could run it stays free: several negotiation cycles (NEGOTIATOR_INTERVAL, 60 s by default).
POOL_STALL_AFTER_S = env_int("NIGHTSHIFT_POOL_STALL_AFTER_S", 600, minimum=5)
# The most runs one sweep may have; all are submitted as one HTCondor cluster.
MAX_SWEEP_RUNS = env_int("NIGHTSHIFT_MAX_SWEEP_RUNS", 1000, minimum=1)
# A sweep of more runs answers at once and the worker writes its runs, showing progress.
SWEEP_RUNS_IN_REQUEST = env_int("NIGHTSHIFT_SWEEP_RUNS_IN_REQUEST", 250, minimum=1)
# A larger sweep's cluster is materialized late: the schedd keeps at most this many of its
# jobs in its queue, making the next as earlier ones leave (all of them at once took the
# schedd longer than a plain submit at 10,000: docs/benchmarks.md).
SWEEP_MATERIALIZE_AT_ONCE = env_int("NIGHTSHIFT_SWEEP_MATERIALIZE_AT_ONCE", 1000, minimum=1)
# Test-only fault injection: the worker pauses after the schedd accepted a job and
# before the portal records it, so that a test can kill the worker in that window.
FAULT_PAUSE_AFTER_SUBMIT_S = env_float("NIGHTSHIFT_FAULT_PAUSE_AFTER_SUBMIT_S", 0.0)

# -- Quotas -------------------------------------------------------------------------------
# For users in no lab, and the starting values of a new lab; empty means no limit.
QUOTA_DEFAULTS = {
    "gpu_hours": env_float("NIGHTSHIFT_QUOTA_GPU_HOURS", None),
    "gpu_hours_period_days": env_int("NIGHTSHIFT_QUOTA_PERIOD_DAYS", 7, minimum=1),
    "max_concurrent_gpus": env_int("NIGHTSHIFT_QUOTA_CONCURRENT_GPUS", None, minimum=1),
    "max_gpus_per_job": env_int("NIGHTSHIFT_QUOTA_GPUS_PER_JOB", None, minimum=1),
    "max_runtime_hours": env_float("NIGHTSHIFT_QUOTA_RUNTIME_HOURS", None),
    "max_queued_jobs": env_int("NIGHTSHIFT_QUOTA_QUEUED_JOBS", None, minimum=1),
}
# A waiting job with no runtime limit holds this many hours per GPU of its quota, so that
# a burst of submissions cannot promise the same last GPU-hour twice.
QUOTA_RESERVATION_HOURS = env_float("NIGHTSHIFT_QUOTA_RESERVATION_HOURS", 1.0, minimum=0.0)
# The HTCondor accounting group of jobs by users in no lab.
DEFAULT_ACCOUNTING_GROUP = env_str("NIGHTSHIFT_ACCOUNTING_GROUP", "nightshift")

# -- Notifications: e-mail, browser notifications (Web Push) and webhooks ----------------
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Nightshift <nightshift@localhost>")
# Where the portal is reached, for links in emails.
PORTAL_URL = env_url("NIGHTSHIFT_PORTAL_URL", "http://127.0.0.1:8000", schemes=("http", "https"))
# The site's VAPID key (a PEM file: `manage.py vapid_key` makes one, and `make run` does);
# absent, browsers are not offered notifications. Webhooks and push services are reached
# at public addresses only, or in these networks.
VAPID_PRIVATE_KEY = env_path("NIGHTSHIFT_VAPID_PRIVATE_KEY", VAR_DIR / "vapid-private.pem")
NOTIFY_URL_ALLOW = env_networks("NIGHTSHIFT_NOTIFY_URL_ALLOW", [])

# -- Live sessions: a running job's TensorBoard or served endpoint, through the portal -----
# Where browsers reach the live proxy (uvicorn portal.asgi_live): its own origin, so that
# nothing a job serves runs in the portal's pages. Production puts it behind nginx, on its
# own host name or (simpler, less isolated) under the portal's /live/.
LIVE_URL = env_url("NIGHTSHIFT_LIVE_URL", "http://127.0.0.1:8001", schemes=("http", "https"))
# condor_ssh_to_job, as the account that owns the portal's jobs; the personal pool's runs
# it inside the pool's root.
LIVE_SSH_TO_JOB = env_command(
    "NIGHTSHIFT_LIVE_SSH_TO_JOB", f"{BASE_DIR}/deploy/personal-pool/pool ssh-to-job"
)
# The tunnels' Unix sockets; the personal pool bind-mounts it into its root.
LIVE_TUNNEL_DIR = env_path("NIGHTSHIFT_LIVE_TUNNEL_DIR", VAR_DIR / "live-tunnels")
# A tunnel nobody used for this long closes (the next request opens it again, in a second).
LIVE_IDLE_S = env_int("NIGHTSHIFT_LIVE_IDLE_S", 900, minimum=10)
# How often the proxy closes the tunnels of jobs that left Running, and idle ones.
# A finished job's TensorBoard runs on the portal's host: this tensorboard program (empty:
# the one installed beside the portal, if any).
LIVE_TENSORBOARD = env_str("NIGHTSHIFT_LIVE_TENSORBOARD", "")
LIVE_REAP_S = env_float("NIGHTSHIFT_LIVE_REAP_S", 15.0, minimum=0.5)
# Notebook sessions: the longest a user may ask for, what the form offers first, how long
# one may sit idle (0: no idle limit), and how many one user may have open at once.
LIVE_SESSION_MAX_HOURS = env_float("NIGHTSHIFT_SESSION_MAX_HOURS", 12.0, minimum=0.1)
LIVE_SESSION_DEFAULT_HOURS = env_float("NIGHTSHIFT_SESSION_DEFAULT_HOURS", 2.0, minimum=0.1)
LIVE_SESSION_IDLE_S = env_int("NIGHTSHIFT_SESSION_IDLE_S", 3600, minimum=0)
LIVE_MAX_OPEN_SESSIONS = env_int("NIGHTSHIFT_MAX_OPEN_SESSIONS", 2, minimum=1)
LIVE_COOKIE_MAX_AGE_S = env_int("NIGHTSHIFT_LIVE_COOKIE_MAX_AGE_S", 12 * 3600, minimum=60)

# -- API ----------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON everywhere; the endpoints that take uploads add multipart.
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "EXCEPTION_HANDLER": "plumbing.api.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
# Rate limits per user, as count/second|minute|hour|day.
API_THROTTLE_RATES = {
    "submissions": env_rate("NIGHTSHIFT_SUBMIT_RATE", "30/minute"),
    "tokens": env_rate("NIGHTSHIFT_TOKEN_RATE", "10/hour"),
}
# Token creations per user per hour, on the web page and the API alike.
TOKENS_PER_HOUR = env_int("NIGHTSHIFT_TOKENS_PER_HOUR", 20, minimum=1)
SPECTACULAR_SETTINGS = {
    "TITLE": "Nightshift API",
    "DESCRIPTION": (
        "Run training jobs on the campus's idle GPU workstations. Authenticate with "
        "`Authorization: Bearer <token>`, using a personal access token from the "
        "API tokens page. Every error has the shape "
        '`{"error": {"code": ..., "message": ..., "fields": {...}}}`.'
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and docs are public documentation; every endpoint they describe is not.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    # No deep links: they put a link inside each operation's toggle button, a control
    # nested in a control, which screen readers and keyboards cannot use (axe-core).
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "jobs.models.JobState",
        "TokenStatusEnum": ["active", "expired", "revoked"],
        "WorkstationStatusEnum": ["free", "nightshift", "busy", "owner", "offline"],
        "SweepKindEnum": "experiments.models.Sweep.Kind",
        "EnvironmentKindEnum": "environments.models.Environment.Kind",
        "VisibilityEnum": "labs.models.Visibility",
        "DatasetSourceEnum": "datasets.models.DatasetVersion.Source",
        "DatasetImportStateEnum": "datasets.models.DatasetImport.State",
        "NotificationChannelEnum": "notifications.events.Channel",
    },
}

# -- Operations -----------------------------------------------------------------------------
# Files that hold secrets, which `check --deploy` wants readable by the portal's account
# alone: every NAME_FILE read above, and the settings file systemd hands over.
SECRET_FILES = [*_env_module.FILES_READ]
SETTINGS_FILE = env_str("NIGHTSHIFT_SETTINGS_FILE", "")
# /metrics (Prometheus) answers a scraper that sends this bearer token, or one whose address
# is in the allow-list (behind nginx, the address nginx saw: NIGHTSHIFT_TRUSTED_PROXY_COUNT).
METRICS_TOKEN = env_str("NIGHTSHIFT_METRICS_TOKEN", "")
METRICS_ALLOW = env_networks("NIGHTSHIFT_METRICS_ALLOW", ["127.0.0.1", "::1"])

DEFAULT_EXCEPTION_REPORTER_FILTER = "portal.errors.SecretsHiddenFilter"
# Lines go to standard error, which systemd's journal (or Docker) keeps. json: one object per
# line with time, level, logger, message, request_id and job_id (portal/logcontext.py).
LOG_FORMAT = env_choice("NIGHTSHIFT_LOG_FORMAT", "text", ("text", "json"))
LOGGING = logging_config(log_format=LOG_FORMAT, level=env_str("LOG_LEVEL", "INFO"))
# Celery workers log through the same configuration instead of their own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
