"""REST views of the audit log (/api/v1/audit/): a page at a time, or streamed as JSON Lines.

Organisation owners and admins read the whole organisation's entries; a namespace's admins read
that namespace's (`?namespace=`).
"""

from __future__ import annotations

import json
import uuid

from django.db.models import Q, QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from tenants import access, audit, roles, selectors
from tenants.errors import Forbidden
from tenants.models import AuditEvent
from tenants.rest.permissions import Need
from tenants.rest.views import _View

AUDIT_PAGE = 100
AUDIT_PAGE_MAX = 1000
_AUDIT_PARAMETERS = [
    OpenApiParameter(
        "namespace", str, description="a namespace id or name (its admins); default: the organisation"
    ),
    OpenApiParameter("since", str, description="RFC 3339 time or a duration back from now (24h, 7d)"),
    OpenApiParameter("until", str, description="RFC 3339 time or a duration back from now (exclusive)"),
    OpenApiParameter("actor", str, description="part of the actor's label (email, pdk_<prefix>) or their id"),
    OpenApiParameter("action", str, description="an action, or a prefix ending in a dot (namespace.)"),
    OpenApiParameter("outcome", str, description="ok, denied or failed"),
]


class BadFilter(ValueError):
    """A filter of the audit log that does not parse (`field` names it)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


OUTCOMES = (audit.OK, audit.DENIED, audit.FAILED)


def audit_scope(
    actor: access.Actor,
    *,
    namespace: str = "",
    since: str = "",
    until: str = "",
    who: str = "",
    action: str = "",
    outcome: str = "",
) -> QuerySet[AuditEvent]:
    """The entries `actor` may read that match the filters: one namespace's (its admins) or the whole
    organisation's (owners and admins); the REST API's and the console's one rule.

    Args:
        namespace: a namespace id or name; empty for the whole organisation.
        since, until: RFC 3339 times or durations back from now (`until` exclusive).
        who: part of the actor's label (an email, `pdk_<prefix>`, a key's name) or their exact id.
        action: an action (`apikey.revoke`), or its prefix ending in a dot (`namespace.`).
        outcome: `ok`, `denied` or `failed`.

    Raises:
        access.NotFound: a namespace outside the actor's reach.
        Forbidden: the actor may not read this part of the log.
        BadFilter: a time or outcome that does not parse.
    """
    reference = namespace.strip()
    found = None
    if reference:
        try:
            uuid.UUID(reference)
        except ValueError:
            found = selectors.namespace_in_organization(organization=actor.organization, name=reference)
            if found is None or actor.namespace_role(found) is None:
                raise access.NotFound("namespace not found") from None
        else:
            found = access.namespace_get(actor, reference)
        if actor.namespace_role(found) != roles.KeyRole.ADMIN:
            raise Forbidden(f"the audit log of {found.name} needs the admin role on it")
    elif not actor.is_org_admin:
        raise Forbidden(
            "the organisation's audit log needs an owner or admin; name a namespace you administer "
            "with ?namespace="
        )
    bounds = {}
    for name, text in (("since", since), ("until", until)):
        if text.strip():
            try:
                bounds[name] = audit.parse_time(text)
            except ValueError as e:
                raise BadFilter(name, str(e)) from None
    query = audit.events(
        organization_id=actor.organization.id,
        namespace_id=found.id if found is not None else None,
        **bounds,
    )
    if who.strip():
        query = query.filter(Q(actor_label__icontains=who.strip()) | Q(actor_id=who.strip()))
    if action.strip():
        wanted = action.strip()
        query = (
            query.filter(action__startswith=wanted) if wanted.endswith(".") else query.filter(action=wanted)
        )
    if outcome.strip():
        if outcome.strip() not in OUTCOMES:
            raise BadFilter("outcome", f"outcome is one of {', '.join(OUTCOMES)}")
        query = query.filter(outcome=outcome.strip())
    return query


def _audit_events(request: Request, actor: access.Actor) -> QuerySet[AuditEvent]:
    """The entries of the query's namespace (its admins) or of the whole organisation (owners and admins)."""
    params = request.query_params
    try:
        return audit_scope(
            actor,
            **{name: params.get(name, "") for name in ("namespace", "since", "until", "action", "outcome")},
            who=params.get("actor", ""),
        )
    except Forbidden as e:
        raise exceptions.PermissionDenied(str(e)) from None
    except BadFilter as e:
        raise exceptions.ValidationError({e.field: [str(e)]}) from None


class AuditListView(_View):
    """The audit log, newest first, a page at a time (`?cursor=` from `next`; `?limit=` up to 1000)."""

    needs = {"GET": Need.MEMBER}

    @extend_schema(
        parameters=[
            *_AUDIT_PARAMETERS,
            OpenApiParameter("cursor", int, description="the `next_cursor` of the previous page"),
            OpenApiParameter("limit", int, description="entries per page (default 100, at most 1000)"),
        ],
        responses={200: dict},
    )
    def get(self, request):
        query = _audit_events(request, self.actor)
        try:
            limit = min(max(int(request.query_params.get("limit", AUDIT_PAGE)), 1), AUDIT_PAGE_MAX)
            cursor = int(request.query_params["cursor"]) if request.query_params.get("cursor") else None
        except ValueError:
            raise exceptions.ValidationError({"cursor": ["cursor and limit are integers"]}) from None
        page, next_cursor = audit.events_page(query, before=cursor, limit=limit)
        next_url = None
        if next_cursor is not None:
            params = request.query_params.copy()
            params["cursor"] = str(next_cursor)
            next_url = request.build_absolute_uri(f"{request.path}?{params.urlencode()}")
        return Response(
            {"results": [audit.as_dict(e) for e in page], "next_cursor": next_cursor, "next": next_url}
        )


class AuditExportView(_View):
    """The audit log as JSON Lines, oldest first, streamed (one entry per line)."""

    needs = {"GET": Need.MEMBER}

    @extend_schema(parameters=_AUDIT_PARAMETERS, responses={(200, "application/x-ndjson"): str})
    def get(self, request):
        query = _audit_events(request, self.actor)
        lines = (
            json.dumps(audit.as_dict(e), separators=(",", ":")) + "\n" for e in audit.events_stream(query)
        )
        response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
        response["Content-Disposition"] = f'attachment; filename="audit-{self.actor.organization.slug}.jsonl"'
        return response
