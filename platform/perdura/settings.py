"""Django settings, all read from PERDURA_* environment variables (see perdura.env)."""

from __future__ import annotations

import os
import secrets

import dj_database_url

from perdura import env

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
    "tenants.apps.TenantsConfig",
    "engine.apps.EngineConfig",
    "visibility.apps.VisibilityConfig",
    "frontend.apps.FrontendConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": []},
    }
]


def _database() -> dict:
    url = env.database_url()
    config = dj_database_url.parse(url, conn_max_age=600)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # IMMEDIATE: a transaction that reads then writes must take the write lock up front, or
        # concurrent writers fail with 'database is locked' instead of waiting (busy timeout).
        config["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
        }
        config["CONN_MAX_AGE"] = None
    else:
        config.setdefault("OPTIONS", {})
    config["ATOMIC_REQUESTS"] = False
    config["TEST"] = (
        {"NAME": os.environ.get("PERDURA_TEST_DATABASE_NAME")} if url.startswith("postgres") else {}
    )
    return config


DATABASES = {"default": _database()}

PERDURA_SHARDS = env.shard_count()
PERDURA_REDIS_URL = env.redis_url()

# Celery (production shard workers); `perdura dev` runs the same shard code in-process instead.
CELERY_BROKER_URL = PERDURA_REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("PERDURA_CELERY_QUEUE", "perdura")
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 300}
PERDURA_TIMER_WAKEUPS = os.environ.get("PERDURA_TIMER_WAKEUPS", "" if env.dev_mode() else "celery")
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
# Per-namespace rate limits (tenants/quotas.py): buckets in Redis shared by every api replica (`memory` in
# dev, `off` to disable), and the default requests per second of each bucket; Temporal Cloud's
# defaults are 500 actions/s and 2000 requests/s per namespace.
PERDURA_RATE_LIMITS = os.environ.get("PERDURA_RATE_LIMITS", "memory" if env.dev_mode() else "redis")
PERDURA_RATE_ACTIONS = env.number("PERDURA_RATE_ACTIONS", 500.0)
PERDURA_RATE_POLLS = env.number("PERDURA_RATE_POLLS", 2000.0)
PERDURA_RATE_VISIBILITY = env.number("PERDURA_RATE_VISIBILITY", 100.0)
# Failed API-key attempts per client address: a burst of this many, then one every 6 seconds.
PERDURA_AUTH_FAILURES = int(env.number("PERDURA_AUTH_FAILURES", 20, integer=True))
# Per-organisation caps (Temporal Cloud starts accounts at 10 namespaces).
PERDURA_ORG_MAX_NAMESPACES = int(env.number("PERDURA_ORG_MAX_NAMESPACES", 10, integer=True))
PERDURA_ORG_MAX_API_KEYS = int(env.number("PERDURA_ORG_MAX_API_KEYS", 100, integer=True))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("PERDURA_LOG_LEVEL", "INFO")},
}
