"""`/organization/audit`: the organisation's audit log (owners and admins; a namespace's admins, theirs),
filtered by namespace, actor, action, outcome and time, newest first, 100 a page; each entry expands to
its details; the filtered view exports as JSON Lines.

The rule of who reads what, and the filters, are the REST API's (`tenants.rest.audit_views.audit_scope`).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.shortcuts import render

from frontend.tenant_views.pages import OrgPage, org_page
from tenants import access, audit
from tenants.errors import Forbidden
from tenants.rest.audit_views import OUTCOMES, BadFilter, audit_scope
from tenants.rest.permissions import Need
from tenants.roles import KeyRole

PAGE = 100
FILTERS = ("namespace", "actor", "action", "outcome", "since", "until")


def _filters(page: OrgPage) -> dict[str, str]:
    """The request's filters; a namespace admin who is not an organisation admin reads a namespace of
    theirs (the first) unless they name one."""
    filters = {name: page.request.GET.get(name, "").strip() for name in FILTERS}
    if not filters["namespace"] and not page.actor.is_org_admin:
        administered = [n.name for n, role in access.namespace_list(page.actor) if role == KeyRole.ADMIN]
        filters["namespace"] = administered[0] if administered else ""
    return filters


def _scope(page: OrgPage, filters: dict[str, str]) -> Any:
    return audit_scope(
        page.actor,
        namespace=filters["namespace"],
        since=filters["since"],
        until=filters["until"],
        who=filters["actor"],
        action=filters["action"],
        outcome=filters["outcome"],
    )


def _refused(page: OrgPage, filters: dict[str, str], status: int, errors: dict[str, str]) -> HttpResponse:
    return _render(page, filters, entries=[], status=status, errors=errors)


def _render(page: OrgPage, filters: dict[str, str], *, status: int = 200, **extra: Any) -> HttpResponse:
    administered = [n.name for n, role in access.namespace_list(page.actor) if role == KeyRole.ADMIN]
    query = urlencode({k: v for k, v in filters.items() if v})
    context = page.context(
        filters=filters,
        administered=administered,
        outcomes=OUTCOMES,
        query=query,
        errors=extra.pop("errors", {}),
        **extra,
    )
    return render(page.request, "frontend/tenant/audit.html", context, status=status)


@org_page(GET=Need.PERSON)
def audit_page(request: HttpRequest, page: OrgPage) -> HttpResponse:
    filters = _filters(page)
    try:
        query = _scope(page, filters)
        before = int(request.GET["before"]) if request.GET.get("before") else None
    except access.NotFound:
        return _refused(page, filters, 404, {"namespace": "Namespace not found."})
    except Forbidden as e:
        return _refused(page, filters, 403, {"form": str(e)})
    except BadFilter as e:
        return _refused(page, filters, 400, {e.field: str(e)})
    except ValueError:
        return _refused(page, filters, 400, {"form": "The page cursor is a number."})
    entries, next_cursor = audit.events_page(query, before=before, limit=PAGE)
    rows = [{"e": e, "json": json.dumps(audit.as_dict(e), indent=2, sort_keys=True)} for e in entries]
    return _render(page, filters, entries=rows, next_cursor=next_cursor)


@org_page(GET=Need.PERSON)
def audit_export(request: HttpRequest, page: OrgPage) -> HttpResponseBase:
    """The filtered entries as JSON Lines, oldest first, streamed."""
    filters = _filters(page)
    try:
        query = _scope(page, filters)
    except access.NotFound:
        return HttpResponse("namespace not found\n", status=404, content_type="text/plain")
    except Forbidden as e:
        return HttpResponse(f"{e}\n", status=403, content_type="text/plain")
    except BadFilter as e:
        return HttpResponse(f"{e.field}: {e}\n", status=400, content_type="text/plain")
    lines = (json.dumps(audit.as_dict(e), separators=(",", ":")) + "\n" for e in audit.events_stream(query))
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="audit-{page.actor.organization.slug}.jsonl"'
    return response
