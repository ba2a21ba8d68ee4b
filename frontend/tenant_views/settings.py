"""`/namespaces/<ns>/settings`, for the namespace's admins: description, retention and codec server URL;
the data key and erasure of a data subject (frontend/tenant_views/compliance.py);
history and visibility archival (state and `s3://` URI, as UpdateNamespace takes them); custom search attributes (add, remove) with each type's limit; the rate limits in force (the operator's,
read-only); deprecate; delete with the name typed to confirm.

Every write is the REST API's or the gRPC API's own service (tenants.services.namespaces,
visibility.services) with the REST serializer's validation; search attribute changes are recorded in
the audit log under their RPC names, as the console's run actions are.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from frontend import reencryption
from frontend.tenant_views.pages import OrgPage, namespace_page, validated
from tenants import archival, audit, quotas
from tenants.errors import NamespaceError, TenantError
from tenants.models import Namespace
from tenants.rest import serializers as s
from tenants.rest.permissions import Need
from tenants.services import namespaces as namespace_service
from visibility import registry
from visibility import services as visibility_services
from visibility.search_attributes import LIMITS, SaType, SearchAttributeError

log = logging.getLogger("perdura.console")


def _attributes(namespace: Namespace) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    """The custom attributes (name, type) and, per type, how many are used of its limit."""
    types = registry.custom_types(namespace.id)
    used = Counter(t for t in types.values())
    limits = [
        {"type": t.name, "value": int(t), "used": used.get(t, 0), "limit": LIMITS.get(t, 0)}
        for t in SaType
        if LIMITS.get(t, 0)
    ]
    return sorted((name, t.name) for name, t in types.items()), limits


def _rates(namespace: Namespace) -> list[dict[str, Any]]:
    rates = quotas.namespace_rates(namespace.rate_limits)
    return [
        {"bucket": bucket.value, "rps": rps, "overridden": bucket in rates.overridden}
        for bucket, rps in sorted(rates.rps.items(), key=lambda item: item[0].value)
    ]


def _archival(namespace: Namespace) -> list[dict[str, Any]]:
    history, visibility = namespace_service.archival_settings(namespace)
    return [
        {"kind": kind, "enabled": setting.state == archival.State.ENABLED, "uri": setting.uri}
        for kind, setting in (("history", history), ("visibility", visibility))
    ]


def render_settings(page: OrgPage, *, status: int = 200, **extra: Any) -> HttpResponse:
    """The settings page, with `errors` (form → message) and what else a refused form puts back."""
    namespace = page.namespace
    assert namespace is not None
    attributes, limits = _attributes(namespace)
    context = page.context(
        ns=namespace,
        state=Namespace.State(namespace.state).name.lower(),
        attributes=attributes,
        limits=limits,
        rates=_rates(namespace),
        archival=extra.pop("archival", None) or _archival(namespace),
        key=reencryption.key_state(namespace.id),
        errors=extra.pop("errors", {}),
        **extra,
    )
    return render(page.request, "frontend/tenant/namespace_settings.html", context, status=status)


def _back(namespace: str, done: str) -> HttpResponse:
    return HttpResponseRedirect(
        reverse("console-namespace-settings", kwargs={"namespace": namespace}) + f"?done={done}"
    )


@namespace_page(GET=Need.NAMESPACE_ADMIN, POST=Need.NAMESPACE_ADMIN)
def settings_page(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """GET the settings; POST the general ones (description, retention, codec server URL)."""
    if request.method == "GET":
        return render_settings(page)
    namespace = page.namespace
    assert namespace is not None
    data, errors = validated(
        s.NamespaceUpdateIn,
        {
            k: request.POST[k]
            for k in ("description", "retention_days", "codec_server_url")
            if k in request.POST
        },
    )
    if errors:
        return render_settings(page, status=400, errors=errors)
    try:
        namespace_service.namespace_update(namespace=namespace, **data)
    except TenantError as e:
        field = "codec_server_url" if "codec" in str(e) else "retention_days"
        return render_settings(page, status=400, errors={field: str(e)})
    return _back(namespace.name, "saved")


@namespace_page(POST=Need.NAMESPACE_ADMIN)
def archival_settings(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """POST history and visibility archival: each enabled or disabled, with its `s3://bucket/prefix` URI
    (the service's rules: enabling needs a URI; a new URI applies to runs archived from then on)."""
    namespace = page.namespace
    assert namespace is not None

    def state(kind: str) -> int:
        return int(archival.State.ENABLED if request.POST.get(f"{kind}_enabled") else archival.State.DISABLED)

    wanted = namespace_service.ArchivalRequest(
        history_state=state("history"),
        history_uri=request.POST.get("history_uri", "").strip(),
        visibility_state=state("visibility"),
        visibility_uri=request.POST.get("visibility_uri", "").strip(),
    )
    try:
        namespace_service.namespace_set_archival(namespace=namespace, request=wanted)
    except NamespaceError as e:
        # The form again as the person filled it, with what is wrong.
        asked = [
            {"kind": kind, "enabled": state(kind) == archival.State.ENABLED, "uri": uri}
            for kind, uri in (("history", wanted.history_uri), ("visibility", wanted.visibility_uri))
        ]
        return render_settings(page, status=400, errors={"archival": str(e)}, archival=asked)
    return _back(namespace.name, "archival")


@namespace_page(POST=Need.NAMESPACE_ADMIN)
def search_attribute_add(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """Register a custom search attribute (as OperatorService AddSearchAttributes, and audited so)."""
    namespace = page.namespace
    assert namespace is not None
    name = request.POST.get("name", "").strip()
    try:
        kind = SaType[request.POST.get("type", "")]
    except KeyError:
        return render_settings(page, status=400, errors={"attribute": "Choose a type."})
    details = {"name": name, "type": kind.name}
    try:
        visibility_services.search_attributes_add(namespace=namespace, attributes={name: int(kind)})
    except SearchAttributeError as e:
        audit.record(
            action="AddSearchAttributes",
            target=f"namespace/{namespace.name}",
            namespace=namespace,
            outcome=audit.FAILED,
            code="INVALID_ARGUMENT",
            details=details,
        )
        return render_settings(page, status=400, errors={"attribute": str(e)})
    audit.record(
        action="AddSearchAttributes",
        target=f"namespace/{namespace.name}",
        namespace=namespace,
        details=details,
    )
    return _back(namespace.name, "attributes")


@namespace_page(POST=Need.NAMESPACE_ADMIN)
def search_attribute_remove(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """Unregister a custom search attribute (as OperatorService RemoveSearchAttributes, audited so)."""
    namespace = page.namespace
    assert namespace is not None
    name = request.POST.get("name", "").strip()
    if name not in registry.custom_types(namespace.id):
        return render_settings(
            page, status=400, errors={"attribute": f"No custom search attribute {name!r}."}
        )
    visibility_services.search_attributes_remove(namespace=namespace, names=[name])
    audit.record(
        action="RemoveSearchAttributes",
        target=f"namespace/{namespace.name}",
        namespace=namespace,
        details={"name": name},
    )
    return _back(namespace.name, "attributes")


@namespace_page(POST=Need.NAMESPACE_ADMIN)
def deprecate(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """Deprecate the namespace: it takes no new run; what runs goes on."""
    namespace = page.namespace
    assert namespace is not None
    namespace_service.namespace_deprecate(namespace=namespace)
    return _back(namespace.name, "deprecated")


@namespace_page(POST=Need.NAMESPACE_ADMIN)
def delete(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """Delete the namespace once its name is typed: renamed `<name>-deleted-<hex>`, keys lose it."""
    namespace = page.namespace
    assert namespace is not None
    if request.POST.get("confirm", "") != namespace.name:
        return render_settings(page, status=400, errors={"delete": f"Type {namespace.name} to delete it."})
    name = namespace.name
    namespace_service.namespace_delete(namespace=namespace)
    log.info("namespace %s deleted in the console by %s", name, page.actor.label)
    return HttpResponseRedirect(reverse("console-namespaces") + f"?deleted={name}")
