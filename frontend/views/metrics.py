"""`/metrics` of the web app: the Prometheus exposition of its processes, for the installation's operator only.

The series name no tenant's data beyond namespace and task-queue names, but together they tell who runs
what, how much, and how it fails: no tenant may read them. The operator is whoever presents
PERDURA_METRICS_TOKEN as a bearer token (what a Prometheus scrape config sends), a signed-in Django
superuser, or, in `perdura dev` without `--require-auth`, a loopback browser (the dev console's operator).
Everyone else is answered 403.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from perdura import env, metrics_server

from frontend.viewer import dev_operator_allowed


def _operator(request: HttpRequest) -> bool:
    token = settings.PERDURA_METRICS_TOKEN
    scheme, _, presented = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(presented.strip(), token):
        return True
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_superuser:
        return True
    return dev_operator_allowed(
        address=request.META.get("REMOTE_ADDR") or "", host=request.META.get("HTTP_HOST", "")
    )


@never_cache
@require_safe
def metrics_page(request: HttpRequest) -> HttpResponse:
    if not _operator(request):
        return HttpResponse(
            "metrics are the operator's: send `Authorization: Bearer <PERDURA_METRICS_TOKEN>`\n",
            status=403,
            content_type="text/plain",
        )
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    extra = []
    if env.dev_mode():
        # `perdura dev` has no worker: its web port shows the engine's backlogs too.
        from engine.shards.scrape import EngineState

        extra.append(EngineState())
    return HttpResponse(generate_latest(metrics_server.registry(extra)), content_type=CONTENT_TYPE_LATEST)
