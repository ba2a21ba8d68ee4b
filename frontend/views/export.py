"""`…/<workflow id>/<run id>/export`: the run's history as a file to download (the Export button).

The file is the run's compliance export (engine/exports): a History in proto3 JSON (`events` at the top,
as `temporal workflow show -o json` prints it), which the SDK's `WorkflowHistory.from_json`, its
`Replayer` and the temporal CLI's history-file reader (`temporal workflow fix-history-json`; CLI 1.9 has
no `workflow show --input`) load as it is, with Perdura's signed sections beside it.
Readers may export, as through the REST API; each export is audited as `export.run` with the person.
"""

from __future__ import annotations

import json
import re

from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from engine.errors import FailedPrecondition, NotFound, Unavailable
from engine.exports import gather, signing
from frontend.console_audit import context_for
from frontend.viewer import Viewer
from frontend.views.common import console_page
from tenants import audit


@require_GET
@console_page
def run_export(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    ns, _role = viewer.namespace(namespace)
    try:
        export = gather.build(namespace=ns, workflow_id=workflow_id, run_id=run_id)
    except NotFound:
        raise Http404("workflow run not found") from None
    except (signing.SigningKeyError, Unavailable, FailedPrecondition) as e:
        # No signing key; or an archived run whose store does not answer or whose archive does not open.
        return HttpResponse(f"Export is not available: {e}", status=503, content_type="text/plain")
    body = json.dumps(export.document, ensure_ascii=False, separators=(",", ":")).encode()
    with audit.acting(context_for(request, viewer)):
        gather.record(namespace=ns, export=export)
    response = HttpResponse(body, content_type="application/json")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{export.workflow_id}_{export.run_id}")[:200]
    response["Content-Disposition"] = f'attachment; filename="{name}_history.json"'
    response["Cache-Control"] = "no-store"
    return response
