"""Console views. For now a status page; the console comes with its own issue."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from engine.models import Execution
from tenants.models import Namespace


def home(request: HttpRequest) -> HttpResponse:
    namespaces = Namespace.objects.count()
    runs = Execution.objects.count()
    return HttpResponse(
        "<!doctype html><title>Perdura</title><h1>Perdura</h1>"
        f"<p>{namespaces} namespace(s), {runs} run(s). The web console is coming; use the Temporal CLI or SDK meanwhile.</p>"
    )
