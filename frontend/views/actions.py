"""Actions on a run from its page: cancel, terminate and signal here, with what every action shares
(who may act, the audit log, the form's reason and JSON input); reset and its preview are in
frontend/views/reset.py, queries, updates and the stack trace in frontend/views/interactive.py.

Who may do what comes from the gRPC API's own table (engine.api.methods: the access each RPC needs)
and the viewer's role on the namespace (tenants.roles), so a reader may query but not signal, exactly
as with an API key. A namespace the viewer may not see answers 404 before anything else; an action
their role does not allow answers 403 (and is recorded as denied). Every action is written to the audit
log as the gRPC API writes it (the RPC's name, `workflow/<id>/<run>`, the outcome and its status code),
with the person (or the loopback operator of `perdura dev`) as actor and `console` as interface;
payloads and reasons stay out of the log, as on the API (the reason is in the run's history).

Actions call the engine's services, never the gRPC servicer.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from temporalio.api.common.v1 import Payload, Payloads

from engine.api.methods import WORKFLOW_METHODS
from engine.errors import EngineError, NotFound
from engine.services import console_reads, workflows
from frontend.console_audit import context_of
from frontend.htmx import HtmxHttpRequest
from frontend.present import status_name
from frontend.viewer import Viewer
from frontend.views.common import console_page
from tenants import audit, roles
from tenants.models import Namespace

CANCEL = "RequestCancelWorkflowExecution"
TERMINATE = "TerminateWorkflowExecution"
SIGNAL = "SignalWorkflowExecution"
RESET = "ResetWorkflowExecution"
QUERY = "QueryWorkflow"
UPDATE = "UpdateWorkflowExecution"

REASON_LIMIT = 1000


def may(role: str, method: str) -> bool:
    """Whether a viewer with `role` on a namespace may make the call `method` there (the gRPC table)."""
    return roles.allows(role, WORKFLOW_METHODS[method].access)


def toolbar_context(
    viewer: Viewer, *, namespace: str, workflow_id: str, run_id: str, status: str
) -> dict[str, object]:
    """What the run page's action bar shows: the actions the viewer's role allows, for this run's state."""
    _ns, role = viewer.namespace(namespace)
    kwargs = {"namespace": namespace, "workflow_id": workflow_id, "run_id": run_id}
    running = status == "Running"
    return {
        "status": status,
        "running": running,
        "can_query": may(role, QUERY),
        "can_signal": running and may(role, SIGNAL),
        "can_update": running and may(role, UPDATE),
        "can_cancel": running and may(role, CANCEL),
        "can_terminate": running and may(role, TERMINATE),
        "can_reset": may(role, RESET),
        "urls": {
            name.replace("-", "_"): reverse(f"console-run-{name}", kwargs=kwargs)
            for name in (
                "bar",
                "cancel",
                "terminate",
                "signal",
                "query",
                "stack-trace",
                "update",
                "reset-form",
            )
        },
    }


# --- who acts, and the audit log -------------------------------------------------------------------


def record(
    context: audit.AuditContext,
    namespace: Namespace,
    method: str,
    workflow_id: str,
    run_id: str,
    *,
    outcome: str = audit.OK,
    code: str = "OK",
    details: dict[str, Any] | None = None,
) -> None:
    audit.record(
        action=method,
        target=f"workflow/{workflow_id}/{run_id}",
        namespace=namespace,
        outcome=outcome,
        code=code,
        details=details,
        context=context,
    )


def allowed(
    request: HttpRequest, viewer: Viewer, namespace: str, method: str, workflow_id: str, run_id: str
) -> Namespace:
    """The namespace, if the viewer's role allows `method` there. Raises Http404 (not theirs) or
    PermissionDenied (recorded as denied, as the gRPC API records a refused call)."""
    ns, role = viewer.namespace(namespace)
    if not may(role, method):
        record(
            context_of(request),
            ns,
            method,
            workflow_id,
            run_id,
            outcome=audit.DENIED,
            code="PERMISSION_DENIED",
        )
        raise PermissionDenied(f"the {role} role may not do this")
    return ns


def audited(
    request: HttpRequest,
    ns: Namespace,
    method: str,
    workflow_id: str,
    run_id: str,
    call: Callable[[], Any],
    details: dict[str, Any] | None = None,
) -> Any:
    """Run `call` and record it with its outcome (the gRPC status name of an engine error)."""
    context = context_of(request)
    try:
        result = call()
    except EngineError as e:
        record(context, ns, method, workflow_id, run_id, outcome=audit.FAILED, code=e.code, details=details)
        raise
    record(context, ns, method, workflow_id, run_id, details=details)
    return result


def identity(viewer: Viewer) -> str:
    return f"console: {viewer.label}"


def reason_of(request: HttpRequest) -> str:
    reason = request.POST.get("reason", "").strip()
    if not reason:
        raise FormError("Give a reason: it is written to the run's history.")
    if len(reason) > REASON_LIMIT:
        raise FormError(f"The reason is longer than {REASON_LIMIT} characters.")
    return reason


class FormError(Exception):
    """Input the person can fix; shown beside the form."""


def json_payloads(text: str) -> Payloads | None:
    """One JSON value as the single argument (the SDKs' json/plain encoding); None for empty input.

    Raises:
        FormError: not JSON.
    """
    text = text.strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise FormError(f"The input is not JSON: {e}") from None
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    return Payloads(payloads=[Payload(metadata={"encoding": b"json/plain"}, data=data)])


def run_url(namespace: str, workflow_id: str, run_id: str) -> str:
    return reverse(
        "console-run", kwargs={"namespace": namespace, "workflow_id": workflow_id, "run_id": run_id}
    )


# --- cancel, terminate, signal ---------------------------------------------------------------------


def _bar(
    request: HtmxHttpRequest,
    viewer: Viewer,
    namespace: str,
    workflow_id: str,
    run_id: str,
    notice: dict[str, str] | None,
) -> HttpResponse:
    """The action bar again, re-read (the run may have closed), with what happened."""
    if not request.htmx:
        return HttpResponseRedirect(run_url(namespace, workflow_id, run_id), status=303)
    ns, _role = viewer.namespace(namespace)
    try:
        run = console_reads.run_view(namespace_id=ns.id, workflow_id=workflow_id, run_id=run_id)
    except NotFound:
        raise Http404("workflow run not found") from None
    status = status_name(run.describe.workflow_execution_info.status)
    context = toolbar_context(
        viewer, namespace=namespace, workflow_id=workflow_id, run_id=run_id, status=status
    )
    return render(request, "frontend/_actions_bar.html", context | {"notice": notice})


@require_GET
@console_page
def bar(
    request: HtmxHttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    """The action bar alone: the page asks again when a live update shows the run's status changed."""
    return _bar(request, viewer, namespace, workflow_id, run_id, None)


def _stop(
    request: HtmxHttpRequest,
    viewer: Viewer,
    namespace: str,
    workflow_id: str,
    run_id: str,
    *,
    method: str,
    service: Callable[..., None],
    done: str,
) -> HttpResponse:
    """Cancel or terminate: the reason the form gives, the service called, the bar again with the outcome."""
    ns = allowed(request, viewer, namespace, method, workflow_id, run_id)
    try:
        reason = reason_of(request)
        call = functools.partial(
            service,
            namespace=ns,
            workflow_id=workflow_id,
            run_id=run_id,
            identity=identity(viewer),
            reason=reason,
        )
        audited(request, ns, method, workflow_id, run_id, call)
    except (FormError, EngineError) as e:
        return _bar(request, viewer, namespace, workflow_id, run_id, {"kind": "error", "text": str(e)})
    return _bar(request, viewer, namespace, workflow_id, run_id, {"kind": "ok", "text": done})


@require_POST
@console_page
def cancel(
    request: HtmxHttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    return _stop(
        request,
        viewer,
        namespace,
        workflow_id,
        run_id,
        method=CANCEL,
        service=workflows.workflow_request_cancel,
        done="Cancellation requested: the workflow decides how to stop.",
    )


@require_POST
@console_page
def terminate(
    request: HtmxHttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    return _stop(
        request,
        viewer,
        namespace,
        workflow_id,
        run_id,
        method=TERMINATE,
        service=functools.partial(workflows.workflow_terminate, details=None),
        done="Terminated.",
    )


def result_part(request: HttpRequest, **context: object) -> HttpResponse:
    return render(request, "frontend/_actions_result.html", context)


@require_POST
@console_page
def signal(
    request: HtmxHttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    ns = allowed(request, viewer, namespace, SIGNAL, workflow_id, run_id)
    name = request.POST.get("name", "").strip()
    try:
        if not name:
            raise FormError("Give the signal's name.")
        payloads = json_payloads(request.POST.get("input", ""))
        audited(
            request,
            ns,
            SIGNAL,
            workflow_id,
            run_id,
            functools.partial(
                workflows.workflow_signal,
                namespace=ns,
                workflow_id=workflow_id,
                run_id=run_id,
                signal_name=name,
                input=payloads,
                identity=identity(viewer),
                request_id=str(uuid.uuid4()),
                header=None,
            ),
            details={"signal_name": name},
        )
    except (FormError, EngineError) as e:
        return result_part(request, error=str(e))
    if not request.htmx:
        return HttpResponseRedirect(run_url(namespace, workflow_id, run_id), status=303)
    return result_part(request, message=f"Signal {name!r} sent.")
