"""REST views of the audit log (/api/v1/audit/): a page at a time, or streamed as JSON Lines.

Organisation owners and admins read the whole organisation's entries; a namespace's admins read
that namespace's (`?namespace=`).
"""

from __future__ import annotations

import json
import uuid

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from tenants import access, audit, roles, selectors
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
]


def _audit_events(request: Request, actor: access.Actor) -> QuerySet[AuditEvent]:
    """The entries of the query's namespace (its admins) or of the whole organisation (owners and admins)."""
    params = request.query_params
    reference = params.get("namespace", "").strip()
    namespace = None
    if reference:
        try:
            uuid.UUID(reference)
        except ValueError:
            namespace = selectors.namespace_in_organization(organization=actor.organization, name=reference)
            if namespace is None or actor.namespace_role(namespace) is None:
                raise access.NotFound("namespace not found") from None
        else:
            namespace = access.namespace_get(actor, reference)
        if actor.namespace_role(namespace) != roles.KeyRole.ADMIN:
            raise exceptions.PermissionDenied(f"the audit log of {namespace.name} needs the admin role on it")
    elif not actor.is_org_admin:
        raise exceptions.PermissionDenied(
            "the organisation's audit log needs an owner or admin; name a namespace you administer "
            "with ?namespace="
        )
    bounds = {}
    for name in ("since", "until"):
        if params.get(name):
            try:
                bounds[name] = audit.parse_time(params[name])
            except ValueError as e:
                raise exceptions.ValidationError({name: [str(e)]}) from None
    return audit.events(
        organization_id=actor.organization.id,
        namespace_id=namespace.id if namespace is not None else None,
        **bounds,
    )


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
