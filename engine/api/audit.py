"""What the gRPC API writes to the audit log (tenants/audit.py): who made an audited call, on what, and its outcome.

The auth interceptor (engine/api/auth.py) binds the caller as the audit context of every audited call,
so control-plane services record namespace changes in their own transaction, and calls it records
itself (the CALL rows of engine/api/methods.py: starts, signals, cancels, terminations, resets,
updates, deletions, schedule and activity operator calls) are written here after the call, with the
status code it ended with. Only ids and names are taken from a request, never payloads (inputs,
signal and update arguments, memos, headers) nor free text a caller may put secrets in.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc

from engine import dbthreads
from tenants import audit, selectors
from tenants.auth import Principal

log = logging.getLogger("perdura.audit")


def context_for(principal: Principal, source: str) -> audit.AuditContext:
    """The audit context of a gRPC caller: its key, or the operator of the loopback allowance."""
    if principal.anonymous:
        actor = audit.operator_actor("loopback")
    else:
        actor = audit.key_actor(principal.prefix, principal.key_name)
    return audit.AuditContext(actor=actor, source=source, via="grpc")


def _workflow(execution: Any) -> str:
    run_id = getattr(execution, "run_id", "")
    return f"workflow/{execution.workflow_id}" + (f"/{run_id}" if run_id else "")


def target_of(method: str, request: Any) -> str:
    """What a call acts on, from the ids in its request (`workflow/<id>[/<run>]`, `schedule/<id>`...)."""
    if request is None:
        return ""
    fields = request.DESCRIPTOR.fields_by_name
    if method == "ExecuteMultiOperation":
        starts = [op.start_workflow.workflow_id for op in request.operations if op.HasField("start_workflow")]
        return f"workflow/{starts[0]}" if starts else ""
    if "schedule_id" in fields:
        return f"schedule/{request.schedule_id}"
    if "job_id" in fields:
        return f"batch/{request.job_id}"
    if "deployment_version" in fields and request.HasField("deployment_version"):
        version = request.deployment_version
        return f"deployment/{version.deployment_name}/{version.build_id}"
    if "deployment_name" in fields:
        build_id = request.build_id if "build_id" in fields else ""
        version = request.version if "version" in fields else ""
        if not build_id and isinstance(version, str) and version.startswith(f"{request.deployment_name}."):
            build_id = version.removeprefix(f"{request.deployment_name}.")  # the deprecated `name.build` form
        return f"deployment/{request.deployment_name}" + (f"/{build_id}" if build_id else "")
    if "workflow_execution" in fields and request.HasField("workflow_execution"):
        target = _workflow(request.workflow_execution)
    elif "execution" in fields and request.HasField("execution"):
        target = _workflow(request.execution)
    elif "workflow_id" in fields and (request.workflow_id or "activity_id" not in fields):
        target = f"workflow/{request.workflow_id}"
        if "run_id" in fields and request.run_id:
            target += f"/{request.run_id}"
    elif "activity_id" in fields and "execution" not in fields:
        # The standalone activity calls (and the activity operator calls without a workflow id).
        run_id = request.run_id if "run_id" in fields else ""
        return f"activity/{request.activity_id}" + (f"/{run_id}" if run_id else "")
    elif not getattr(request, "namespace", "") and "namespace_id" in fields:
        return f"namespace/{request.namespace_id}"
    else:
        return f"namespace/{getattr(request, 'namespace', '')}"
    if "activity_id" in fields and request.activity_id:
        target += f"/activity/{request.activity_id}"
    elif "execution" in fields and "id" in fields and request.id:
        # PauseActivity, UnpauseActivity, ResetActivity, UpdateActivityOptions: `id` is the activity's.
        target += f"/activity/{request.id}"
    return target


def details_of(method: str, request: Any) -> dict[str, Any]:
    """Names that say what was done (workflow type, signal or update name, attribute names), no payloads."""
    if request is None:
        return {}
    fields = request.DESCRIPTOR.fields_by_name
    details: dict[str, Any] = {}
    if "workflow_type" in fields and request.workflow_type.name:
        details["workflow_type"] = request.workflow_type.name
    if "signal_name" in fields and request.signal_name:
        details["signal_name"] = request.signal_name
    if method == "UpdateWorkflowExecution" and request.request.input.name:
        details["update_name"] = request.request.input.name
    if method == "ResetWorkflowExecution":
        details["workflow_task_finish_event_id"] = request.workflow_task_finish_event_id
    if method == "StartBatchOperation":
        operation = request.WhichOneof("operation")
        if operation:
            details["operation"] = operation.removesuffix("_operation")
        if request.signal_operation.signal:
            details["signal_name"] = request.signal_operation.signal
        details["runs_listed" if not request.visibility_query else "by_query"] = (
            len(request.executions) + len(request.target_executions) if not request.visibility_query else True
        )
    if method in ("AddSearchAttributes", "RemoveSearchAttributes"):
        details["search_attributes"] = sorted(request.search_attributes)
    if "execution" in fields and "type" in fields and request.type:
        details["activity_type"] = request.type  # the activity operator calls, by type
    if any(name in fields and getattr(request, name) for name in ("match_all", "unpause_all")):
        details["all_activities"] = True
    return details


WRITTEN_WITH_THE_CHANGE = frozenset(
    {"StartWorkflowExecution", "SignalWorkflowExecution", "SignalWithStartWorkflowExecution"}
)
"""Audited calls whose entry, when they succeed, is written in the transaction of their change
(tenants.audit.PendingEntry): the ones a busy namespace makes most, where a commit of its own for the
entry doubled the commits of each call. Their first committed transaction is their outcome."""


def write_ok(method: str, context: audit.AuditContext, principal: Principal, request: Any) -> None:
    """The entry of a call that succeeded, in the current transaction."""
    _write(method, context, principal, request, audit.OK, "OK")


def _write(
    method: str, context: audit.AuditContext, principal: Principal, request: Any, outcome: str, code: str
) -> None:
    name = getattr(request, "namespace", "") or ""
    namespace = selectors.namespace_by_name(name) if name else None
    organization_id = None
    if not principal.anonymous and (
        namespace is None or str(namespace.organization_id) != principal.organization_id
    ):
        # A key's refused attempt on a namespace outside its organisation belongs to the key's own
        # organisation's log, never to the other tenant's.
        organization_id, namespace = principal.organization_id, None
    audit.record(
        action=method,
        target=target_of(method, request),
        organization_id=organization_id,
        namespace=namespace,
        namespace_name=name,
        outcome=outcome,
        code=code,
        details=details_of(method, request),
        context=context,
    )


async def record_call(
    method: str, context: audit.AuditContext, principal: Principal, request: Any, code: grpc.StatusCode
) -> None:
    """Append the entry of an audited call that ended with `code`. A failure to write it is logged,
    not raised: the call has already taken effect, and the caller must learn its real outcome."""
    if code is grpc.StatusCode.OK:
        outcome = audit.OK
    elif code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
        outcome = audit.DENIED
    else:
        outcome = audit.FAILED
    try:
        await dbthreads.run(_write, method, context, principal, request, outcome, code.name)
    except Exception:
        log.exception("could not write the audit entry of %s by %s", method, context.actor.id)
