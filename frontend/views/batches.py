"""`/namespaces/<ns>/batch-operations`: the namespace's batches, one batch's progress (live), stopping it,
and starting one (terminate, cancel, signal, delete or reset) from the workflows list's current query
after showing how many runs match.

Reads and writes go through engine/services/batches.py, as the batch RPCs do. Starting and stopping need
what StartBatchOperation and StopBatchOperation need in the gRPC table (engine.api.methods): a reader
sees no buttons, and a POST of theirs answers 403 and is recorded as denied. Each start and stop is
written to the audit log under the RPC's name, on `batch/<job id>`, with the person and `console`.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from temporalio.api.batch.v1 import (
    BatchOperationCancellation,
    BatchOperationDeletion,
    BatchOperationReset,
    BatchOperationSignal,
    BatchOperationTermination,
)
from temporalio.api.common.v1 import ResetOptions
from temporalio.api.enums.v1 import BatchOperationState, BatchOperationType, ResetReapplyExcludeType
from temporalio.api.workflowservice.v1 import StartBatchOperationRequest

from engine.api.methods import WORKFLOW_METHODS
from engine.errors import EngineError, NotFound
from engine.models import BatchOperation
from engine.services import batches
from frontend.console_audit import context_for
from frontend.viewer import Viewer
from frontend.views.actions import FormError, json_payloads
from frontend.views.common import base_context, console_page
from tenants import audit, roles
from tenants.models import Namespace
from visibility import selectors
from visibility.query.parser import QueryError

START = "StartBatchOperation"
STOP = "StopBatchOperation"
REASON_LIMIT = 1000
OPERATIONS = {
    "terminate": "Terminate",
    "cancel": "Request cancellation",
    "signal": "Signal",
    "delete": "Delete",
    "reset": "Reset",
}
RESET_POINTS = {"first": "First workflow task", "last": "Last workflow task"}


def may(role: str, method: str) -> bool:
    return roles.allows(role, WORKFLOW_METHODS[method].access)


def state_name(state: int) -> str:
    return BatchOperationState.Name(state).removeprefix("BATCH_OPERATION_STATE_").title()  # type: ignore[arg-type]


def type_name(kind: int) -> str:
    name = BatchOperationType.Name(kind).removeprefix("BATCH_OPERATION_TYPE_")  # type: ignore[arg-type]
    return name.removesuffix("_WORKFLOW").replace("_", " ").title()


def _row(b: BatchOperation) -> dict[str, Any]:
    done = b.completed + b.failed
    return {
        "job_id": b.job_id,
        "type": type_name(b.operation_type),
        "state": state_name(b.state),
        "start": b.start_time,
        "close": b.close_time,
        "total": b.total,
        "completed": b.completed,
        "failed": b.failed,
        "done": done,
        "percent": 100 if not b.total else done * 100 // b.total,
        "query": b.query,
        "reason": b.reason,
        "identity": b.identity,
        "parked": b.parked_at is not None,
        "last_error": b.last_error,
        "stop_reason": b.stop_reason,
    }


@console_page
def batch_list(request: HttpRequest, viewer: Viewer, namespace: str) -> HttpResponse:
    ns, _role = viewer.namespace(namespace)
    rows, _more = batches.batch_list(namespace=ns, page_size=100, after_pk=None)
    context = base_context(viewer, namespace) | {"batches": [_row(b) for b in rows]}
    return render(request, "frontend/batches.html", context)


def detail_context(viewer: Viewer, *, namespace: str, job_id: str) -> dict[str, object]:
    """What the batch page shows, read now (the page, and its live updates). Raises Http404."""
    ns, role = viewer.namespace(namespace)
    try:
        row = batches.batch_get(namespace=ns, job_id=job_id)
    except NotFound:
        raise Http404("batch operation not found") from None
    shown = _row(row)
    return base_context(viewer, namespace) | {
        "batch": shown,
        "can_stop": shown["state"] == "Running" and may(role, STOP),
    }


@console_page
def batch_detail(request: HttpRequest, viewer: Viewer, namespace: str, job_id: str) -> HttpResponse:
    context = detail_context(viewer, namespace=namespace, job_id=job_id)
    return render(request, "frontend/batch.html", context | {"done": request.GET.get("done", "")})


def _record(
    request: HttpRequest,
    viewer: Viewer,
    ns: Namespace,
    method: str,
    job_id: str,
    *,
    outcome: str = audit.OK,
    code: str = "OK",
    details: dict[str, Any] | None = None,
) -> None:
    audit.record(
        action=method,
        target=f"batch/{job_id}",
        namespace=ns,
        outcome=outcome,
        code=code,
        details=details,
        context=context_for(request, viewer),
    )


def _refuse(request: HttpRequest, viewer: Viewer, ns: Namespace, method: str, job_id: str) -> HttpResponse:
    _record(request, viewer, ns, method, job_id, outcome=audit.DENIED, code="PERMISSION_DENIED")
    return HttpResponse("Your role on this namespace may not do this.", status=403, content_type="text/plain")


@require_POST
@console_page
def batch_stop(request: HttpRequest, viewer: Viewer, namespace: str, job_id: str) -> HttpResponse:
    ns, role = viewer.namespace(namespace)
    if not may(role, STOP):
        return _refuse(request, viewer, ns, STOP, job_id)
    reason = request.POST.get("reason", "").strip()[:REASON_LIMIT] or "stopped from the console"
    try:
        batches.batch_stop(namespace=ns, job_id=job_id, reason=reason, identity=f"console: {viewer.label}")
    except EngineError as e:
        _record(request, viewer, ns, STOP, job_id, outcome=audit.FAILED, code=e.code)
        if isinstance(e, NotFound):
            raise Http404("batch operation not running") from None
        raise
    _record(request, viewer, ns, STOP, job_id)
    url = reverse("console-batch", kwargs={"namespace": namespace, "job_id": job_id})
    return HttpResponseRedirect(f"{url}?{urlencode({'done': 'stopped'})}", status=303)


def _matching(ns: Namespace, query: str) -> tuple[int | None, str]:
    """How many runs the query matches now, or the parser's complaint."""
    try:
        total, _groups = selectors.execution_count(namespace_id=ns.id, query=query)
    except QueryError as e:
        return None, str(e)
    return total, ""


def _operation(request: HttpRequest, identity: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(the request's operation field, its message's fields, the audit details) from the form."""
    chosen = request.POST.get("operation", "")
    if chosen == "terminate":
        return (
            "termination_operation",
            {"termination_operation": BatchOperationTermination(identity=identity)},
            {},
        )
    if chosen == "cancel":
        return (
            "cancellation_operation",
            {"cancellation_operation": BatchOperationCancellation(identity=identity)},
            {},
        )
    if chosen == "delete":
        return "deletion_operation", {"deletion_operation": BatchOperationDeletion(identity=identity)}, {}
    if chosen == "signal":
        name = request.POST.get("signal_name", "").strip()
        if not name:
            raise FormError("Name the signal to send.")
        payloads = json_payloads(request.POST.get("signal_input", ""))
        signal = BatchOperationSignal(signal=name, identity=identity)
        if payloads is not None:
            signal.input.CopyFrom(payloads)
        return "signal_operation", {"signal_operation": signal}, {"signal_name": name}
    if chosen == "reset":
        return _reset_operation(request, identity)
    raise FormError("Pick what to do to the runs.")


def _reset_operation(request: HttpRequest, identity: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Reset each run to its first or last completed workflow task, re-applying its signals and updates
    after that point unless excluded (as `temporal workflow reset --query` does)."""
    point = request.POST.get("reset_point", "")
    if point not in RESET_POINTS:
        raise FormError("Pick the point each run is reset to.")
    options = ResetOptions()
    if point == "first":
        options.first_workflow_task.SetInParent()
    else:
        options.last_workflow_task.SetInParent()
    excluded = []
    if request.POST.get("exclude_signals") == "yes":
        excluded.append(ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL)
    if request.POST.get("exclude_updates") == "yes":
        excluded.append(ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE)
    options.reset_reapply_exclude_types.extend(excluded)
    details = {
        "reset_point": point,
        "exclude": [
            ResetReapplyExcludeType.Name(e).removeprefix("RESET_REAPPLY_EXCLUDE_TYPE_").lower()
            for e in excluded
        ],
    }
    return (
        "reset_operation",
        {"reset_operation": BatchOperationReset(identity=identity, options=options)},
        details,
    )


@require_http_methods(["GET", "POST"])
@console_page
def batch_new(request: HttpRequest, viewer: Viewer, namespace: str) -> HttpResponse:
    """The form that starts a batch over a query: how many runs match now, the action, a reason, and a
    confirmation naming that count."""
    ns, role = viewer.namespace(namespace)
    query = (request.POST if request.method == "POST" else request.GET).get("query", "")
    if request.method == "POST" and not may(role, START):
        return _refuse(request, viewer, ns, START, "")
    total, problem = _matching(ns, query)
    context = base_context(viewer, namespace) | {
        "query": query,
        "total": total,
        "problem": problem,
        "operations": OPERATIONS,
        "reset_points": RESET_POINTS,
        "can_start": may(role, START),
        "form": request.POST,
    }
    if request.method != "POST":
        return render(request, "frontend/batch_new.html", context)
    job_id = f"console-{uuid.uuid4()}"
    details: dict[str, Any] = {}
    try:
        if problem:
            raise FormError(problem)
        if not query.strip():
            raise FormError("A batch needs a filter: it would act on every run of the namespace.")
        reason = request.POST.get("reason", "").strip()
        if not reason:
            raise FormError("Give a reason: it is kept with the batch and in the runs' histories.")
        if len(reason) > REASON_LIMIT:
            raise FormError(f"The reason is longer than {REASON_LIMIT} characters.")
        if request.POST.get("confirm") != "yes":
            raise FormError("Confirm that the batch may act on the runs that match.")
        field, operation, details = _operation(request, f"console: {viewer.label}"[:255])
        details = {"operation": field.removesuffix("_operation"), **details, "by_query": True}
        batches.batch_start(
            namespace=ns,
            request=StartBatchOperationRequest(
                namespace=ns.name, job_id=job_id, reason=reason, visibility_query=query, **operation
            ),
        )
    except FormError as e:
        return render(request, "frontend/batch_new.html", context | {"error": str(e)}, status=400)
    except EngineError as e:
        _record(request, viewer, ns, START, job_id, outcome=audit.FAILED, code=e.code, details=details)
        return render(request, "frontend/batch_new.html", context | {"error": e.message}, status=400)
    _record(request, viewer, ns, START, job_id, details=details)
    url = reverse("console-batch", kwargs={"namespace": namespace, "job_id": job_id})
    return HttpResponseRedirect(url, status=303)
