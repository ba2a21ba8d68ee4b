"""`/namespaces`: the organisation's dashboard (each namespace's runs by status and a chart of starts and
failures) and, for an empty organisation, the first steps: a namespace, a key, a snippet that connects.

Namespaces are created by `tenants.services.namespaces.namespace_register` with the REST API's
serializer (`NamespaceIn`), as `POST /api/v1/namespaces/` does.
"""

from __future__ import annotations

import logging
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from frontend import present
from frontend.tenant_views import charts
from frontend.tenant_views.pages import OrgPage, org_page, validated
from tenants import access
from tenants.errors import TenantError
from tenants.models import Namespace
from tenants.rest import serializers as s
from tenants.rest.permissions import Need
from tenants.services import namespaces as namespace_service
from visibility import selectors as visibility
from visibility.query.parser import QueryError

log = logging.getLogger("perdura.console")

SHOWN_STATUSES = ("Running", "Completed", "Failed")


def _status_counts(namespace: Namespace) -> dict[str, int]:
    """The namespace's runs per status (one GROUP BY ExecutionStatus count)."""
    try:
        _, groups = visibility.execution_count(namespace_id=namespace.id, query="GROUP BY ExecutionStatus")
    except QueryError:  # pragma: no cover - a constant filter
        return {}
    return {present.status_name(status): count for status, count in groups}


def dashboard_rows(page: OrgPage, window: charts.Window) -> list[dict[str, Any]]:
    """One row per namespace the person has a role on: counts, chart, role and what they may open."""
    rows = []
    for namespace, role in access.namespace_list(page.actor):
        counts = _status_counts(namespace)
        rows.append(
            {
                "namespace": namespace,
                "role": role.value,
                "state": Namespace.State(namespace.state).name.lower(),
                "counts": [(name, counts.get(name, 0)) for name in SHOWN_STATUSES],
                "chart": charts.namespace_chart(namespace=namespace, window=window),
                "can_admin": page.can(Need.NAMESPACE_ADMIN, namespace),
            }
        )
    return rows


def _render(
    page: OrgPage, *, errors: dict[str, str] | None = None, status: int = 200, **extra: Any
) -> HttpResponse:
    request = page.request
    window = charts.window_named(request.GET.get("range", "24h"))
    rows = dashboard_rows(page, window)
    has_keys = bool(access.apikey_list(page.actor))
    can_create = page.can(Need.NAMESPACE_CREATE)
    context = page.context(
        rows=rows,
        window=window,
        windows=charts.WINDOWS,
        can_create=can_create,
        # The guide for whoever can follow it: an organisation admin without a namespace or a key yet.
        first_steps=can_create and (not rows or not has_keys or "welcome" in request.GET),
        has_keys=has_keys,
        errors=errors or {},
        values=extra.pop("values", {}),
        **extra,
    )
    return render(request, "frontend/tenant/namespaces.html", context, status=status)


@org_page(GET=Need.MEMBER, POST=Need.NAMESPACE_CREATE)
def namespaces_page(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """GET the dashboard; POST creates a namespace (`orders` becomes `orders.<organisation>`)."""
    if request.method == "GET":
        return _render(page)
    data, errors = validated(s.NamespaceIn, request.POST)
    values = {k: request.POST.get(k, "") for k in ("name", "description", "retention_days")}
    if errors:
        return _render(page, errors=errors, status=400, values=values)
    actor = page.actor
    try:
        namespace = namespace_service.namespace_register(
            name=namespace_service.namespace_full_name(organization=actor.organization, name=data["name"]),
            organization=actor.organization,
            description=data["description"],
            retention_days=data["retention_days"],
        )
    except TenantError as e:
        return _render(page, errors={"name": str(e)}, status=400, values=values)
    log.info("namespace %s created in the console by %s", namespace.name, actor.label)
    return HttpResponseRedirect(reverse("console-namespaces") + f"?created={namespace.name}")
