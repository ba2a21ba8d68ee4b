"""`/organization/api-keys`: the keys a person may see (prefix, name, role, namespaces, own rate limits,
expiry, last use); create one (shown once, with the snippets that connect with it, and rates of its own
for admins of its namespaces), revoke, rotate with a grace period.

Each write is the REST API's: its serializer (`ApiKeyIn`, `RotateIn`), its scoped fetches
(tenants/access.py) and its services (tenants/services/keys.py), so a key never exceeds its creator
here either.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from perdura import clock

from frontend.tenant_views.pages import OrgPage, org_page, validated
from frontend.tenant_views.snippets import snippets_for
from tenants import access, api_keys, quotas
from tenants.errors import Forbidden, TenantError
from tenants.models import ApiKey
from tenants.rest import serializers as s
from tenants.rest.permissions import Need
from tenants.roles import KeyRole
from tenants.services import keys as key_service

log = logging.getLogger("perdura.console")

GRACE_CHOICES = [(0, "at once"), (3600, "1 hour"), (86400, "1 day"), (7 * 86400, "7 days")]


def _state(key: ApiKey) -> str:
    now = clock.now()
    if key.revoked_at is not None:
        return "revoked"
    if key.expires_at <= now:
        return "expired"
    return "active"


def _rows(page: OrgPage) -> list[dict[str, Any]]:
    rows = []
    for key in access.apikey_list(page.actor):
        namespaces = list(key.namespaces.all())
        state = _state(key)
        rows.append(
            {
                "key": key,
                "display": api_keys.display(key.prefix),
                "namespaces": sorted(n.name for n in namespaces),
                "state": state,
                "created_by": key.created_by.email if key.created_by is not None else "operator",
                "rate_limits": [f"{b} {v:g}/s" for b, v in sorted((key.rate_limits or {}).items())],
                "may_revoke": state == "active",
                "may_rotate": state == "active"
                and key_service.apikey_within_creator(actor=page.actor, role=key.role, namespaces=namespaces),
            }
        )
    return rows


def _offered_roles(page: OrgPage, namespaces: list[tuple[Any, KeyRole]]) -> list[str]:
    """The roles the person may give a key on at least one namespace (the form offers no other)."""
    return [
        role.value
        for role in KeyRole
        if any(
            key_service.apikey_within_creator(actor=page.actor, role=role.value, namespaces=[n])
            for n, _ in namespaces
        )
    ]


def _render(page: OrgPage, *, status: int = 200, **extra: Any) -> HttpResponse:
    namespaces = access.namespace_list(page.actor)
    values = extra.pop("values", {})
    given = values.get("rate_limits", {})
    context = page.context(
        rows=_rows(page),
        key_namespaces=[(n, r.value) for n, r in namespaces],
        offered_roles=_offered_roles(page, namespaces),
        grace_choices=GRACE_CHOICES,
        rate_fields=[(b.value, given.get(b.value, "")) for b in quotas.LIMITED],
        key_share=f"{quotas.key_share():g}",
        errors=extra.pop("errors", {}),
        values=values,
        **extra,
    )
    return render(page.request, "frontend/tenant/api_keys.html", context, status=status)


def _created(page: OrgPage, key: ApiKey, plaintext: str, status: int, verb: str) -> HttpResponse:
    namespaces = sorted(n.name for n in key.namespaces.all())
    snippets = snippets_for(namespace=namespaces[0], key=plaintext) if namespaces else None
    response = _render(
        page,
        status=status,
        created={
            "key": plaintext,
            "name": key.name,
            "verb": verb,
            "namespace": namespaces[0] if namespaces else "",
        },
        snippets=snippets,
    )
    # The page holds the key in plain text: no cache (the browser's or a proxy's) may keep it.
    response["Cache-Control"] = "no-store"
    return response


@org_page(GET=Need.PERSON, POST=Need.PERSON)
def api_keys_page(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """GET the list; POST creates a key (role at most yours on each of its namespaces), shown once."""
    if request.method == "GET":
        return _render(page)
    chosen = request.POST.getlist("namespaces")
    form: dict[str, object] = {
        "name": request.POST.get("name", ""),
        "role": request.POST.get("role", ""),
        "namespaces": chosen,
        "expires_in_days": request.POST.get("expires_in_days") or 90,
        # A bucket left blank keeps the default share of the namespace's rate.
        "rate_limits": {
            b.value: request.POST[f"rate_{b.value}"]
            for b in quotas.LIMITED
            if request.POST.get(f"rate_{b.value}", "").strip()
        },
    }
    values = {**form, "namespaces": set(chosen)}
    data, errors = validated(s.ApiKeyIn, form)
    if errors:
        return _render(page, status=400, errors=errors, values=values)
    try:
        namespaces = [access.namespace_get(page.actor, n) for n in data["namespaces"]]
        key, plaintext = key_service.apikey_create_by_person(
            actor=page.actor,
            name=data["name"],
            role=data["role"],
            namespaces=namespaces,
            expires_in=timedelta(days=data["expires_in_days"]),
            rate_limits=data["rate_limits"],
        )
    except access.NotFound as e:
        return _render(page, status=400, errors={"namespaces": str(e)}, values=values)
    except TenantError as e:
        status = 403 if isinstance(e, Forbidden) else 400
        return _render(page, status=status, errors={"form": str(e)}, values=values)
    log.info("API key %s created in the console by %s", key, page.actor.label)
    return _created(page, key, plaintext, 201, "created")


@org_page(POST=Need.PERSON)
def api_key_revoke(request: HttpRequest, page: OrgPage, key_id: str) -> HttpResponse:
    """Revoke a key: its next call, REST or gRPC, is refused."""
    key = _key(page, key_id)
    key_service.apikey_revoke(key=key)
    log.info("API key %s revoked in the console by %s", key, page.actor.label)
    return _render(page, revoked=api_keys.display(key.prefix))


@org_page(POST=Need.PERSON)
def api_key_rotate(request: HttpRequest, page: OrgPage, key_id: str) -> HttpResponse:
    """A successor with the same grants, shown once; the old key stops after the chosen grace."""
    key = _key(page, key_id)
    data, errors = validated(s.RotateIn, request.POST)
    if errors:
        return _render(page, status=400, errors={"form": "; ".join(errors.values())})
    try:
        successor, plaintext = key_service.apikey_rotate_by_person(
            actor=page.actor, key=key, grace=timedelta(seconds=data["grace_seconds"])
        )
    except TenantError as e:
        status = 403 if isinstance(e, Forbidden) else 400
        return _render(page, status=status, errors={"form": str(e)})
    log.info("API key %s rotated in the console to %s by %s", key, successor, page.actor.label)
    return _created(page, successor, plaintext, 201, "rotated")


def _key(page: OrgPage, key_id: str) -> ApiKey:
    try:
        return access.apikey_get(page.actor, key_id)
    except access.NotFound:
        raise Http404("API key not found") from None
