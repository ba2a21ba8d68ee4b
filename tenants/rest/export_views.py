"""REST: a run's compliance export (engine/exports), for readers of its namespace, audited as `export.run`."""

from __future__ import annotations

import json
import re

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.response import Response

from tenants import access
from tenants.rest.permissions import Need
from tenants.rest.views import _View


class RunExportView(_View):
    """One run's export file: history, audit entries, attributes and memo, links, signed manifest.

    The namespace is fetched inside the caller's reach (404 for another tenant's or one the key has no
    role on, as for a missing run); readers and above may export.
    """

    needs = {"GET": Need.NAMESPACE_READ}

    @extend_schema(
        parameters=[
            OpenApiParameter("workflow_id", str, required=True, description="the run's workflow id"),
            OpenApiParameter("run_id", str, description="the run (default: the current or latest run)"),
        ],
        responses={(200, "application/json"): dict},
    )
    def get(self, request, namespace_id):
        from engine.errors import FailedPrecondition, NotFound, Unavailable
        from engine.exports import gather, signing

        namespace = access.namespace_get(self.actor, namespace_id)
        self.check_object_permissions(request, namespace)
        workflow_id = request.query_params.get("workflow_id", "")
        if not workflow_id:
            raise exceptions.ValidationError({"workflow_id": ["name the run's workflow id"]})
        try:
            export = gather.build(
                namespace=namespace, workflow_id=workflow_id, run_id=request.query_params.get("run_id", "")
            )
        except NotFound as e:
            raise exceptions.NotFound(str(e)) from None
        except FailedPrecondition as e:  # an archived run whose archive is missing or does not open
            return Response({"detail": str(e)}, status=status.HTTP_409_CONFLICT)
        except (signing.SigningKeyError, Unavailable) as e:  # no key; an archive store that does not answer
            return Response({"detail": str(e)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        body = json.dumps(export.document, ensure_ascii=False, separators=(",", ":")).encode()
        gather.record(namespace=namespace, export=export)
        response = HttpResponse(body, content_type="application/json")
        name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{export.workflow_id}-{export.run_id}")[:200]
        response["Content-Disposition"] = f'attachment; filename="run-export-{name}.json"'
        return response
