"""HTTP health of the web app (`perdura web`, the web port of `perdura dev`), for load balancers and probes.

`/healthz` says the process serves requests at all and touches nothing else: a liveness probe that failed
whenever the database did would restart every replica during an outage, which helps nobody. `/readyz` says
this replica can do its work: the database answers, every migration this code knows is applied (a replica
of a new release started before `perdura migrate` ran is not ready), and Redis answers where the web app
uses it (live updates, shared throttles). Both answer a small JSON body, 200 or 503.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

log = logging.getLogger("perdura.health")
REDIS_TIMEOUT_SECONDS = 2.0

_migrated = False
"""Once the schema was seen current it stays so for this process (migrations are never unapplied under
a running release), and the migration graph need not be loaded again at every probe."""


@never_cache
@require_safe
async def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    ready, body = readiness()
    return JsonResponse(body, status=200 if ready else 503)


def readiness() -> tuple[bool, dict[str, object]]:
    """Whether this process can do its work, and the body `/readyz` answers (also on the metrics port of
    `perdura api` and `perdura worker`, perdura/metrics_server.py)."""
    checks = {"database": _database(), "migrations": _migrations()}
    redis_url = _redis_url()
    if redis_url:
        checks["redis"] = _redis(redis_url)
    ready = all(value == "ok" for value in checks.values())
    return ready, {"status": "ok" if ready else "unavailable", "checks": checks}


def _database() -> str:
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as e:
        log.warning("readiness: the database does not answer: %s", type(e).__name__)
        # A connection that failed must not be reused by the next request of this thread.
        connections[DEFAULT_DB_ALIAS].close_if_unusable_or_obsolete()
        return "unreachable"
    return "ok"


def _migrations() -> str:
    global _migrated
    if _migrated:
        return "ok"
    from django.db.migrations.executor import MigrationExecutor

    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as e:
        log.warning("readiness: cannot read the applied migrations: %s", type(e).__name__)
        return "unknown"
    if pending:
        return "pending"
    _migrated = True
    return "ok"


def _redis_url() -> str:
    """Redis's address if the web app uses it (the channel layer of live updates, or shared throttles)."""
    layer = settings.CHANNEL_LAYERS.get("default", {}).get("BACKEND", "")
    throttle = settings.CACHES.get("throttle", {}).get("BACKEND", "")
    if "redis" in layer.lower() or "redis" in throttle.lower():
        return settings.PERDURA_REDIS_URL
    return ""


def _redis(url: str) -> str:
    import redis

    client = redis.Redis.from_url(
        url, socket_timeout=REDIS_TIMEOUT_SECONDS, socket_connect_timeout=REDIS_TIMEOUT_SECONDS
    )
    try:
        client.ping()
    except redis.RedisError as e:
        log.warning("readiness: Redis does not answer: %s", type(e).__name__)
        return "unreachable"
    finally:
        client.close()
    return "ok"
