"""Actions on a run from its page: cancel, terminate, signal and reset (with its preview), and the
interactive reads: queries, updates and the workflow's stack trace.

Who may do what comes from the gRPC API's own table (engine.api.methods: the access each RPC needs)
and the viewer's role on the namespace (tenants.roles), so a reader may query but not signal, exactly
as with an API key. A namespace the viewer may not see answers 404 before anything else; an action
their role does not allow answers 403 (and is recorded as denied). Every action is written to the audit
log as the gRPC API writes it (the RPC's name, `workflow/<id>/<run>`, the outcome and its status code),
with the person (or the loopback operator of `perdura dev`) as actor and `console` as interface;
payloads and reasons stay out of the log, as on the API (the reason is in the run's history).

Actions call the engine's services, never the gRPC servicer. Queries and updates wait for a worker, so
their views are coroutines (engine.services.console_calls): a wait must not hold the thread every
synchronous view of the process shares.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from temporalio.api.common.v1 import Payload, Payloads, WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest

from engine.api.methods import WORKFLOW_METHODS
from engine.errors import EngineError, NotFound
from engine.services import console_calls, console_reads, reset_preview, workflows
from engine.services.reset import workflow_reset
from frontend import history
from frontend.console_audit import context_of
from frontend.payloads import decode_all
from frontend.present import status_name
from frontend.viewer import Viewer, viewer_for
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
QUERY_TIMEOUT_SECONDS = 10.0
UPDATE_TIMEOUT_SECONDS = 10.0
PREVIEW_ROWS = 200
"""Dropped events listed in a preview; beyond this the preview counts them."""


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


def _record(
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


def _allowed(
    request: HttpRequest, viewer: Viewer, namespace: str, method: str, workflow_id: str, run_id: str
) -> Namespace:
    """The namespace, if the viewer's role allows `method` there. Raises Http404 (not theirs) or
    PermissionDenied (recorded as denied, as the gRPC API records a refused call)."""
    ns, role = viewer.namespace(namespace)
    if not may(role, method):
        _record(
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


def _audited(
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
        _record(context, ns, method, workflow_id, run_id, outcome=audit.FAILED, code=e.code, details=details)
        raise
    _record(context, ns, method, workflow_id, run_id, details=details)
    return result


def _identity(viewer: Viewer) -> str:
    return f"console: {viewer.label}"


def _reason(request: HttpRequest) -> str:
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


def _run_url(namespace: str, workflow_id: str, run_id: str) -> str:
    return reverse(
        "console-run", kwargs={"namespace": namespace, "workflow_id": workflow_id, "run_id": run_id}
    )


# --- cancel, terminate, signal ---------------------------------------------------------------------


def _bar(
    request: HttpRequest,
    viewer: Viewer,
    namespace: str,
    workflow_id: str,
    run_id: str,
    notice: dict[str, str] | None,
) -> HttpResponse:
    """The action bar again, re-read (the run may have closed), with what happened."""
    if not request.htmx:
        return HttpResponseRedirect(_run_url(namespace, workflow_id, run_id), status=303)
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
def bar(request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str) -> HttpResponse:
    """The action bar alone: the page asks again when a live update shows the run's status changed."""
    return _bar(request, viewer, namespace, workflow_id, run_id, None)


def _stop(
    request: HttpRequest,
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
    ns = _allowed(request, viewer, namespace, method, workflow_id, run_id)
    try:
        reason = _reason(request)
        call = functools.partial(
            service,
            namespace=ns,
            workflow_id=workflow_id,
            run_id=run_id,
            identity=_identity(viewer),
            reason=reason,
        )
        _audited(request, ns, method, workflow_id, run_id, call)
    except (FormError, EngineError) as e:
        return _bar(request, viewer, namespace, workflow_id, run_id, {"kind": "error", "text": str(e)})
    return _bar(request, viewer, namespace, workflow_id, run_id, {"kind": "ok", "text": done})


@require_POST
@console_page
def cancel(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
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
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
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


def _result(request: HttpRequest, **context: object) -> HttpResponse:
    return render(request, "frontend/_actions_result.html", context)


@require_POST
@console_page
def signal(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    ns = _allowed(request, viewer, namespace, SIGNAL, workflow_id, run_id)
    name = request.POST.get("name", "").strip()
    try:
        if not name:
            raise FormError("Give the signal's name.")
        payloads = json_payloads(request.POST.get("input", ""))
        _audited(
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
                identity=_identity(viewer),
                request_id=str(uuid.uuid4()),
                header=None,
            ),
            details={"signal_name": name},
        )
    except (FormError, EngineError) as e:
        return _result(request, error=str(e))
    if not request.htmx:
        return HttpResponseRedirect(_run_url(namespace, workflow_id, run_id), status=303)
    return _result(request, message=f"Signal {name!r} sent.")


# --- reset -----------------------------------------------------------------------------------------


def _reset_exclusions(params: Any) -> set[int]:
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
    ns = _allowed(request, viewer, namespace, RESET, workflow_id, run_id)
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
    ns = _allowed(request, viewer, namespace, RESET, workflow_id, run_id)
    return render(
        request, "frontend/_reset_preview.html", _preview_context(ns, workflow_id, run_id, request.GET)
    )


@require_POST
@console_page
def reset(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    """Reset to the chosen point; land on the new run."""
    ns = _allowed(request, viewer, namespace, RESET, workflow_id, run_id)
    params = request.POST
    try:
        reason = _reason(request)
        finish = _reset_point(ns, workflow_id, run_id, params.get("point", "last"))
        excluded = sorted(_reset_exclusions(params))
        new_run_id = _audited(
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
    url = _run_url(namespace, workflow_id, new_run_id)
    if request.htmx:
        return HttpResponse(headers={"HX-Redirect": url})
    return HttpResponseRedirect(url, status=303)


# --- queries, the stack trace, updates (coroutines: they wait for a worker) -----------------------

AsyncPage = Callable[..., Awaitable[HttpResponse]]


def _async_console_page(view: AsyncPage) -> AsyncPage:
    """`console_page` for coroutine views: the viewer is resolved on a database thread."""

    @functools.wraps(view)
    async def wrapper(request: HttpRequest, **kwargs: str) -> HttpResponse:
        viewer = await sync_to_async(viewer_for, thread_sensitive=False)(request)
        if viewer is None:
            return HttpResponseRedirect(
                reverse("console-login") + "?" + urlencode({"next": request.get_full_path()})
            )
        return await view(request, viewer, **kwargs)

    return wrapper


async def _ask_query(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str, query_type: str
) -> HttpResponse:
    ns = await sync_to_async(_allowed, thread_sensitive=False)(
        request, viewer, namespace, QUERY, workflow_id, run_id
    )
    try:
        args = json_payloads(request.POST.get("input", ""))
        answer = await console_calls.query_ask(
            namespace=ns,
            workflow_id=workflow_id,
            run_id=run_id,
            query_type=query_type,
            args=args,
            timeout=QUERY_TIMEOUT_SECONDS,
        )
    except NotFound:
        raise Http404("workflow run not found") from None
    except (FormError, EngineError) as e:
        return _result(request, error=str(e), title=query_type)
    payloads = decode_all(answer) if answer is not None else []
    if query_type == console_calls.STACK_TRACE_QUERY:
        # The SDKs answer with one string: shown as the text it is, not as a JSON string literal.
        texts = [json.loads(p.text) if p.kind == "json" else p.text for p in payloads]
        return _result(request, stack="\n".join(t if isinstance(t, str) else json.dumps(t) for t in texts))
    return _result(request, payloads=payloads, title=query_type)


@require_POST
@_async_console_page
async def query(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    name = request.POST.get("name", "").strip()
    if not name:
        return _result(request, error="Give the query's name.")
    return await _ask_query(request, viewer, namespace, workflow_id, run_id, name)


@require_POST
@_async_console_page
async def stack_trace(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    return await _ask_query(request, viewer, namespace, workflow_id, run_id, console_calls.STACK_TRACE_QUERY)


@require_POST
@_async_console_page
async def update(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    to_thread = functools.partial(sync_to_async, thread_sensitive=False)
    ns = await to_thread(_allowed)(request, viewer, namespace, UPDATE, workflow_id, run_id)
    context = await to_thread(context_of)(request)
    name = request.POST.get("name", "").strip()
    try:
        if not name:
            raise FormError("Give the update's name.")
        args = json_payloads(request.POST.get("input", ""))
    except FormError as e:
        return _result(request, error=str(e), title=name)
    details = {"update_name": name}
    try:
        answer = await console_calls.update_ask(
            namespace=ns,
            workflow_id=workflow_id,
            run_id=run_id,
            name=name,
            args=args,
            identity=_identity(viewer),
            timeout=UPDATE_TIMEOUT_SECONDS,
        )
    except EngineError as e:
        await to_thread(_record)(
            context, ns, UPDATE, workflow_id, run_id, outcome=audit.FAILED, code=e.code, details=details
        )
        return _result(request, error=str(e), title=name)
    await to_thread(_record)(context, ns, UPDATE, workflow_id, run_id, details=details)
    if answer.outcome is None:
        return _result(
            request,
            error=f"Update {answer.update_id} was admitted, but no worker completed it within "
            f"{UPDATE_TIMEOUT_SECONDS:.0f} s; it stays pending on the run.",
            title=name,
        )
    if answer.outcome.HasField("failure"):
        return _result(request, error=answer.outcome.failure.message or "the update failed", title=name)
    return _result(request, payloads=decode_all(answer.outcome.success), title=name)
