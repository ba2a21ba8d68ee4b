"""Reset from the run page: the dialog's reset points, a preview of what the reset drops and
re-applies (writes nothing), and the reset itself, landing on the new run. Unlike the Temporal UI,
the person may leave signals or updates out of re-application.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import ResetReapplyExcludeType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest

from engine.errors import EngineError, NotFound
from engine.services import reset_preview
from engine.services.reset import workflow_reset
from frontend import history
from frontend.htmx import HtmxHttpRequest
from frontend.payloads import decode_all
from frontend.viewer import Viewer
from frontend.views.actions import RESET, FormError, allowed, audited, reason_of, run_url
from frontend.views.common import console_page
from tenants.models import Namespace

PREVIEW_ROWS = 200
"""Dropped events listed in a preview; beyond this the preview counts them."""


def _reset_exclusions(params: Any) -> set[ResetReapplyExcludeType.ValueType]:
    excluded = set()
    if not params.get("reapply_signals"):
        excluded.add(reset_preview.EXCLUDE_SIGNALS)
    if not params.get("reapply_updates"):
        excluded.add(reset_preview.EXCLUDE_UPDATES)
    return excluded


def _reset_point(ns: Namespace, workflow_id: str, run_id: str, choice: str) -> int:
    """The WorkflowTaskCompleted event id the form's choice names (`first`, `last` or an event id)."""
    if choice.isdigit():
        return int(choice)
    points = reset_preview.reset_points(namespace=ns, workflow_id=workflow_id, run_id=run_id)
    if not points:
        raise FormError("The run has no completed workflow task to reset to.")
    return points[0].event_id if choice == "first" else points[-1].event_id


@require_GET
@console_page
def reset_form(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    """The reset dialog's form: the run's reset points, the re-apply choices, the reason."""
    ns = allowed(request, viewer, namespace, RESET, workflow_id, run_id)
    try:
        points = reset_preview.reset_points(namespace=ns, workflow_id=workflow_id, run_id=run_id)
    except NotFound:
        raise Http404("workflow run not found") from None
    kwargs = {"namespace": namespace, "workflow_id": workflow_id, "run_id": run_id}
    # The preview of the form's first choices (the last workflow task, everything re-applied) comes with it.
    preview = (
        _preview_context(
            ns,
            workflow_id,
            run_id,
            {"point": str(points[-1].event_id), "reapply_signals": "1", "reapply_updates": "1"},
        )
        if points
        else {}
    )
    return render(
        request,
        "frontend/_reset.html",
        preview
        | {
            "points": [{"event_id": p.event_id, "time": p.time} for p in points],
            "first": points[0].event_id if points else None,
            "last": points[-1].event_id if points else None,
            "request_id": str(uuid.uuid4()),
            "reset_url": reverse("console-run-reset", kwargs=kwargs),
            "preview_url": reverse("console-run-reset-preview", kwargs=kwargs),
        },
    )


def _preview_context(ns: Namespace, workflow_id: str, run_id: str, params: Any) -> dict[str, object]:
    try:
        finish = _reset_point(ns, workflow_id, run_id, params.get("point", "last"))
        preview = reset_preview.reset_preview(
            namespace=ns,
            workflow_id=workflow_id,
            run_id=run_id,
            finish_event_id=finish,
            exclude_types=_reset_exclusions(params),
        )
    except (FormError, EngineError) as e:
        return {"error": str(e)}
    return {
        "finish_event_id": preview.finish_event_id,
        "dropped": [history.event_row(e) for e in preview.dropped[:PREVIEW_ROWS]],
        "dropped_count": len(preview.dropped),
        "dropped_more": max(len(preview.dropped) - PREVIEW_ROWS, 0),
        "reapplied": [_message_row(e) for e in preview.reapplied],
        "excluded": [_message_row(e) for e in preview.excluded],
        "added": [history.event_row(e) for e in preview.added],
    }


def _message_row(event: Any) -> dict[str, object]:
    """A re-applied (or excluded) signal or update: its kind, name and decoded input."""
    if event.HasField("workflow_execution_signaled_event_attributes"):
        attrs = event.workflow_execution_signaled_event_attributes
        return {"kind": "Signal", "name": attrs.signal_name, "input": decode_all(attrs.input)}
    request = event.workflow_execution_update_admitted_event_attributes.request
    return {"kind": "Update", "name": request.input.name, "input": decode_all(request.input.args)}


@require_GET
@console_page
def reset_preview_part(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    """What the reset would drop and re-apply for the form's current choices (writes nothing)."""
    ns = allowed(request, viewer, namespace, RESET, workflow_id, run_id)
    return render(
        request, "frontend/_reset_preview.html", _preview_context(ns, workflow_id, run_id, request.GET)
    )


@require_POST
@console_page
def reset(
    request: HtmxHttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    """Reset to the chosen point; land on the new run."""
    ns = allowed(request, viewer, namespace, RESET, workflow_id, run_id)
    params = request.POST
    try:
        reason = reason_of(request)
        finish = _reset_point(ns, workflow_id, run_id, params.get("point", "last"))
        excluded = sorted(_reset_exclusions(params))
        new_run_id = audited(
            request,
            ns,
            RESET,
            workflow_id,
            run_id,
            functools.partial(
                workflow_reset,
                namespace=ns,
                request=ResetWorkflowExecutionRequest(
                    namespace=ns.name,
                    workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
                    reason=reason,
                    workflow_task_finish_event_id=finish,
                    request_id=params.get("request_id") or str(uuid.uuid4()),
                    reset_reapply_exclude_types=excluded,
                ),
            ),
            details={"workflow_task_finish_event_id": finish, "reapply_exclude_types": excluded},
        )
    except (FormError, EngineError) as e:
        if request.htmx:
            return render(request, "frontend/_reset_preview.html", {"error": str(e)})
        return HttpResponse(str(e), status=400, content_type="text/plain; charset=utf-8")
    url = run_url(namespace, workflow_id, new_run_id)
    if request.htmx:
        return HttpResponse(headers={"HX-Redirect": url})
    return HttpResponseRedirect(url, status=303)
