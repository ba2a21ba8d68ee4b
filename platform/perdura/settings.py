"""Django settings, all read from PERDURA_* environment variables (see perdura.env)."""

from __future__ import annotations

import logging
import os
import secrets
from typing import Any

import dj_database_url

from perdura import env, logs

DEBUG = env.flag("PERDURA_DEBUG")
SECRET_KEY = os.environ.get("PERDURA_SECRET_KEY") or secrets.token_urlsafe(50)
ALLOWED_HOSTS = ["*"]
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "perdura.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served by us: /api/docs/ loads nothing from a CDN
    "guardian",
    "tenants.apps.TenantsConfig",
    "engine.apps.EngineConfig",
    "visibility.apps.VisibilityConfig",
    "frontend.apps.FrontendConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_htmx.middleware.HtmxMiddleware",  # request.htmx: console pages answer fragments to htmx
    "frontend.middleware.ConsoleSecurityHeaders",  # CSP without inline scripts, framing refused
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]


def _shard_lease_seconds() -> float:
    # How long a shard worker's lease lasts (no renewal: a pass that outlives it is fenced off by the next
    # taker). Short values make a stalled worker's shard move on sooner; the chaos tests use a few seconds.
    return env.number("PERDURA_SHARD_LEASE_SECONDS", 30.0)


def postgres_statement_options() -> dict[str, Any]:
    """How statements go to Postgres (PERDURA_DB_PREPARED_STATEMENTS, on by default): with their parameters
    bound by the server, and prepared on a connection once it has sent one five times, so the engine's
    few hot statements (a run's lock, its compare-and-swap with the rows it implies, a claim) are planned
    once per connection, not at every call. That took a fifth off production's mean transaction time
    (bench/README.md). Switch it off behind a pooler in transaction mode that does not keep prepared
    statements (PgBouncer before 1.21): Django's default, parameters bound into the statement's text."""
    if not env.flag("PERDURA_DB_PREPARED_STATEMENTS", default=True):
        return {}
    return {"server_side_binding": True, "prepare_threshold": 5}


def _database() -> dj_database_url.DBConfig:
    url = env.database_url()
    config = dj_database_url.parse(url, conn_max_age=600)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["ENGINE"] = "perdura.sqlite"
        # IMMEDIATE: a transaction that reads then writes must take the write lock up front, or
        # concurrent writers fail with 'database is locked' instead of waiting (busy timeout).
        config["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
        }
        config["CONN_MAX_AGE"] = None
    else:
        # A transaction left idle for longer than a shard lease belongs to a process that stopped
        # mid-transaction (SIGSTOP, a VM or GC freeze, a partition that keeps the socket open). Its row
        # locks (the FOR SHARE fence on the shard lease, a run's row) would hold the shard, and every
        # worker that tries to take it over, for as long as it stays stopped: Postgres ends such a
        # session, and its transaction with it, once it has been idle for a lease (tests/chaos).
        options = config.setdefault("OPTIONS", {})
        options.update(postgres_statement_options())
        idle_ms = int(_shard_lease_seconds() * 1000)
        options["options"] = (
            f"{options.get('options', '')} -c idle_in_transaction_session_timeout={idle_ms}".strip()
        )
    config["ATOMIC_REQUESTS"] = False
    config["TEST"] = (
        {"NAME": os.environ.get("PERDURA_TEST_DATABASE_NAME")} if url.startswith("postgres") else {}
    )
    return config


DATABASES = {"default": _database()}

PERDURA_SHARDS = env.shard_count()
PERDURA_SHARD_LEASE_SECONDS = _shard_lease_seconds()
# Shard loops per `perdura worker` (engine/shards/loop.py): each holds its share of the shards and passes
# over one at a time, so a worker fires the timers of this many shards at once.
PERDURA_SHARD_LOOPS = int(env.number("PERDURA_SHARD_LOOPS", 16))
PERDURA_REDIS_URL = env.redis_url()

# Celery (production shard workers); `perdura dev` runs the same shard code in-process instead.
CELERY_BROKER_URL = PERDURA_REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("PERDURA_CELERY_QUEUE", "perdura")
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 300}
# How often beat sweeps the shards for due work; timer wake-ups are sent two sweeps ahead of their time
# (engine/persistence/wakeups.py), never further: Redis redelivers a message held past the visibility
# timeout, and a worker would hold a copy more every five minutes until the timer fires.
PERDURA_SWEEP_SECONDS = env.number("PERDURA_SWEEP_SECONDS", 2.0)
# Who polls which task queue (DescribeTaskQueue): process memory in dev, Redis shared by every api replica.
PERDURA_POLLERS = os.environ.get("PERDURA_POLLERS", "memory" if env.dev_mode() else "redis")
# Visibility (list/count/scan): `sql` (the default) or `opensearch`, fed by the shard workers (README).
PERDURA_VISIBILITY = os.environ.get("PERDURA_VISIBILITY", "sql")
PERDURA_OPENSEARCH_URL = os.environ.get("PERDURA_OPENSEARCH_URL", "")
PERDURA_OPENSEARCH_INDEX = os.environ.get("PERDURA_OPENSEARCH_INDEX", "perdura-visibility")
PERDURA_OPENSEARCH_CA_CERTS = os.environ.get("PERDURA_OPENSEARCH_CA_CERTS", "")
PERDURA_OPENSEARCH_SHARDS = int(os.environ.get("PERDURA_OPENSEARCH_SHARDS", "1"))
PERDURA_OPENSEARCH_REPLICAS = int(os.environ.get("PERDURA_OPENSEARCH_REPLICAS", "1"))
# API keys on the gRPC API: `required` (the default of `perdura api`), or `loopback`, which lets calls
# without credentials from 127.0.0.1/::1 through as the operator (the default of `perdura dev`).
PERDURA_AUTH = env.auth_mode()
PERDURA_METRICS_TOKEN = os.environ.get("PERDURA_METRICS_TOKEN", "")
"""The bearer token that reads the web app's /metrics (frontend/views/metrics.py); empty: none does."""
# TLS on the gRPC listener (PEM files); both or neither. Plaintext when unset (behind a TLS-terminating proxy).
PERDURA_TLS_CERT = os.environ.get("PERDURA_TLS_CERT", "")
PERDURA_TLS_KEY = os.environ.get("PERDURA_TLS_KEY", "")
# Per-namespace rate limits (tenants/quotas.py): buckets in Redis shared by every api replica (`memory` in
# dev, `off` to disable), and the default requests per second of each bucket; Temporal Cloud's
# defaults are 500 actions/s and 2000 requests/s per namespace.
PERDURA_RATE_LIMITS = os.environ.get("PERDURA_RATE_LIMITS", "memory" if env.dev_mode() else "redis")
# Expired runs deleted (and archived) per second at most, by all workers together; `off`: as fast as they
# can (engine/shards/retention_pace.py). The bucket lives where the rate limits' do.
PERDURA_RETENTION_RATE = (
    0.0
    if os.environ.get("PERDURA_RETENTION_RATE", "").strip().lower() in ("0", "off")
    else env.number("PERDURA_RETENTION_RATE", 0.0)
)
# Actions per second of a batch operation at most (StartBatchOperation may ask for fewer).
PERDURA_BATCH_RPS = env.number("PERDURA_BATCH_RPS", 50.0)
PERDURA_RATE_ACTIONS = env.number("PERDURA_RATE_ACTIONS", 500.0)
PERDURA_RATE_POLLS = env.number("PERDURA_RATE_POLLS", 2000.0)
PERDURA_RATE_VISIBILITY = env.number("PERDURA_RATE_VISIBILITY", 100.0)
PERDURA_RATE_REST = env.number("PERDURA_RATE_REST", 50.0)
# Each API key's default share of each bucket of each of its namespaces (0 < share <= 1; 1: a key may spend
# its namespace's whole rate, as before per-key limits); a key's own rates (ApiKey.rate_limits) replace it.
PERDURA_KEY_RATE_SHARE = env.number("PERDURA_KEY_RATE_SHARE", 0.5)
if PERDURA_KEY_RATE_SHARE > 1:
    raise SystemExit(f"PERDURA_KEY_RATE_SHARE must be at most 1, not {PERDURA_KEY_RATE_SHARE}")
# Failed API-key attempts per client address: a burst of this many, then one every 6 seconds.
PERDURA_AUTH_FAILURES = int(env.number("PERDURA_AUTH_FAILURES", 20, integer=True))
# Per-organisation caps (Temporal Cloud starts accounts at 10 namespaces).
PERDURA_ORG_MAX_NAMESPACES = int(env.number("PERDURA_ORG_MAX_NAMESPACES", 10, integer=True))
PERDURA_ORG_MAX_API_KEYS = int(env.number("PERDURA_ORG_MAX_API_KEYS", 100, integer=True))
# How long audit entries are kept (days; 0: forever): `perdura audit prune` and beat delete older ones.
PERDURA_AUDIT_RETENTION_DAYS = env.audit_retention_days()
# Shard queue rows (timers, transfers, visibility, schedule ticks, retention) whose processing raises are
# retried with backoff (1 s doubling to 5 min) and parked after this many attempts (engine/shards/parking.py).
PERDURA_SHARD_MAX_ATTEMPTS = int(env.number("PERDURA_SHARD_MAX_ATTEMPTS", 10, integer=True))
# Runs a data key re-encryption moves per transaction (engine/persistence/reencrypt.py): smaller batches
# hold their row locks for less time, larger ones commit less often.
PERDURA_REENCRYPT_BATCH = int(env.number("PERDURA_REENCRYPT_BATCH", 50, integer=True))
# The shortest retention the operator may give a namespace (`perdura namespace update --retention`);
# tenants choose whole days (1-90).
PERDURA_RETENTION_MIN_SECONDS = int(env.number("PERDURA_RETENTION_MIN_SECONDS", 30, integer=True))
# A worker deployment version no longer routed to is DRAINING until no open run is pinned to it: counted
# after this grace (visibility's lag), then at most once per refresh (Temporal's defaults: 3 min each).
PERDURA_VERSION_DRAINAGE_GRACE_SECONDS = env.number("PERDURA_VERSION_DRAINAGE_GRACE_SECONDS", 180)
PERDURA_VERSION_DRAINAGE_REFRESH_SECONDS = env.number("PERDURA_VERSION_DRAINAGE_REFRESH_SECONDS", 180)
# The buckets namespaces may archive to (comma-separated); empty: any bucket the server's credentials reach.
PERDURA_ARCHIVAL_BUCKETS = frozenset(
    b.strip() for b in os.environ.get("PERDURA_ARCHIVAL_BUCKETS", "").split(",") if b.strip()
)
# Celery's cold shutdown (SIGTERM, see `perdura worker`) lets running tasks finish this long first.
CELERY_WORKER_SOFT_SHUTDOWN_TIMEOUT = 2.0

# The web app (`perdura web`, and the UI port of `perdura dev`): accounts, the REST API (tenants/rest/).
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",  # per-namespace roles (tenants/roles.py)
]
ANONYMOUS_USER_NAME = None  # guardian: no anonymous user row; anonymous callers get nothing
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.flag("PERDURA_SECURE_COOKIES")
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("PERDURA_CSRF_TRUSTED_ORIGINS", "").split(",") if o]
STATIC_URL = "/static/"
LOGIN_URL = "/login/"
PERDURA_WEB_URL = os.environ.get("PERDURA_WEB_URL", "http://127.0.0.1:8233").rstrip("/")
# The gRPC address clients dial, as the console's connection snippets name it (host:port), and whether it
# speaks TLS there (a TLS-terminating load balancer in front of a plaintext `perdura api` does).
PERDURA_API_ADDRESS = os.environ.get("PERDURA_API_ADDRESS", "localhost:7233")
PERDURA_API_TLS = env.flag("PERDURA_API_TLS", default=bool(PERDURA_TLS_CERT))
EMAIL_BACKEND = os.environ.get(
    "PERDURA_EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if env.dev_mode()
    else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = os.environ.get("PERDURA_EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("PERDURA_EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("PERDURA_EMAIL_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("PERDURA_EMAIL_PASSWORD", "")
EMAIL_USE_TLS = env.flag("PERDURA_EMAIL_TLS")
DEFAULT_FROM_EMAIL = os.environ.get("PERDURA_EMAIL_FROM", "Perdura <noreply@localhost>")
# The console's live updates (frontend/live/, engine/live.py): "run changed" hints travel from the processes
# that commit runs (`perdura api`, the shard workers) to `perdura web`'s websockets through Redis; `perdura dev`
# is one process, so process memory. `PERDURA_LIVE=memory|redis` overrides (`off`: no hints are sent).
PERDURA_LIVE = os.environ.get("PERDURA_LIVE", "memory" if env.dev_mode() else "redis")
CHANNEL_LAYERS: dict[str, dict[str, Any]] = {
    "default": (
        {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"expiry": 10, "capacity": 100}}
        if PERDURA_LIVE != "redis"
        else {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # Hints are worth little after a few seconds: small queues that expire fast. The socket timeout
            # must outlast the layer's 5 s blocking reads (redis-py 8 defaults to 5 s: every idle socket's
            # read would time out and close it).
            "CONFIG": {
                "hosts": [{"address": PERDURA_REDIS_URL, "socket_timeout": 15}],
                "prefix": "perdura-live",
                "expiry": 10,
                "capacity": 100,
            },
        }
    )
}
# Login throttling and failed-key counting need one count across web replicas: Redis outside dev.
CACHES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": (
        {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle"}
        if os.environ.get("PERDURA_WEB_THROTTLE", "memory" if env.dev_mode() else "redis") == "memory"
        else {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": PERDURA_REDIS_URL}
    ),
}
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenants.rest.authentication.ApiKeyAuthentication",
        "tenants.rest.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["tenants.rest.permissions.Declared"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "tenants.rest.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # Per organisation, from the rate limiter's buckets; the anonymous account views set their own.
    "DEFAULT_THROTTLE_CLASSES": ["tenants.rest.throttles.OrganizationThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "login": os.environ.get("PERDURA_LOGIN_RATE", "10/min"),
        "login_account": os.environ.get("PERDURA_LOGIN_ACCOUNT_RATE", "5/min"),
        "signup": os.environ.get("PERDURA_SIGNUP_RATE", "20/hour"),
        "password_reset": os.environ.get("PERDURA_PASSWORD_RESET_RATE", "10/hour"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Perdura control-plane API",
    "DESCRIPTION": "Organisations, members, namespaces and API keys. Session (with CSRF) or `Authorization: Bearer <API key>`.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "ENUM_NAME_OVERRIDES": {
        "NamespaceRoleEnum": "tenants.rest.serializers.ROLE_CHOICES",
        "OrganizationRoleEnum": "tenants.rest.serializers.ORG_ROLE_CHOICES",
    },
}

# Text lines by default; PERDURA_LOG_FORMAT=json writes one JSON object a line (perdura/logs.py).
LOGGING = logs.logging_config()
if logs.is_json():
    logging.captureWarnings(True)  # warnings through the JSON handler, not as bare lines on stderr
