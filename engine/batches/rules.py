"""The batch operations' rules, pure: what a start request may ask, which operation it names, how fast a
batch may go, and what a target's outcome is. engine/services/batches.py does the I/O around them.

The behaviour and the messages follow Temporal's frontend (StartBatchOperation's checks) and its batcher
(service/worker/batcher): a target that is gone or closed counts as done, as there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio.api.batch.v1 import (
    BatchOperationCancellation,
    BatchOperationDeletion,
    BatchOperationReset,
    BatchOperationResetActivities,
    BatchOperationSignal,
    BatchOperationTermination,
    BatchOperationUnpauseActivities,
)
from temporalio.api.enums.v1 import BatchOperationState, BatchOperationType, ExecutionType
from temporalio.api.workflowservice.v1 import StartBatchOperationRequest

from engine.errors import InvalidArgument, Unimplemented
from visibility.divisions import is_activity_host

MAX_ID_LENGTH = 1000
RUNNING = BatchOperationState.BATCH_OPERATION_STATE_RUNNING
COMPLETED = BatchOperationState.BATCH_OPERATION_STATE_COMPLETED
FAILED = BatchOperationState.BATCH_OPERATION_STATE_FAILED

TERMINATE = BatchOperationType.BATCH_OPERATION_TYPE_TERMINATE_WORKFLOW
CANCEL = BatchOperationType.BATCH_OPERATION_TYPE_CANCEL_WORKFLOW
SIGNAL = BatchOperationType.BATCH_OPERATION_TYPE_SIGNAL_WORKFLOW
DELETE = BatchOperationType.BATCH_OPERATION_TYPE_DELETE_WORKFLOW
RESET = BatchOperationType.BATCH_OPERATION_TYPE_RESET_WORKFLOW
UNPAUSE_ACTIVITIES = BatchOperationType.BATCH_OPERATION_TYPE_UNPAUSE_ACTIVITY
RESET_ACTIVITIES = BatchOperationType.BATCH_OPERATION_TYPE_RESET_ACTIVITY

OPERATIONS: dict[str, int] = {
    "termination_operation": TERMINATE,
    "cancellation_operation": CANCEL,
    "signal_operation": SIGNAL,
    "deletion_operation": DELETE,
    "reset_operation": RESET,
    "unpause_activities_operation": UNPAUSE_ACTIVITIES,
    "reset_activities_operation": RESET_ACTIVITIES,
}
"""The request's operation field → the type Describe reports (the `_WORKFLOW` names Temporal 1.32 gives)."""

UNSUPPORTED = (
    "update_workflow_options_operation",
    "update_activity_options_operation",
    "cancel_activities_operation",
    "terminate_activities_operation",
    "delete_activities_operation",
)

Operation = (
    BatchOperationTermination
    | BatchOperationCancellation
    | BatchOperationSignal
    | BatchOperationDeletion
    | BatchOperationReset
    | BatchOperationUnpauseActivities
    | BatchOperationResetActivities
)

BURST = timedelta(seconds=1)
"""How far a batch that waited may catch up at once: one second's worth of actions."""
WAKE_SLACK = timedelta(milliseconds=200)
"""A paced batch is looked at again this long after its next action is allowed, so a pass takes a few
actions at a time (the burst covers the wait) instead of waking its shard for every one."""


@dataclass(frozen=True, slots=True)
class Target:
    """A run named in the request (an empty run id: the workflow's current run when the batch starts)."""

    workflow_id: str
    run_id: str


@dataclass(frozen=True, slots=True)
class StartPlan:
    """A checked start request."""

    operation_type: int
    operation_field: str
    query: str
    """The visibility query; empty when the request lists its runs."""
    targets: tuple[Target, ...]
    identity: str


def _identity(request: StartBatchOperationRequest, field: str) -> str:
    operation = getattr(request, field)
    return str(getattr(operation, "identity", ""))


def check_start(request: StartBatchOperationRequest) -> StartPlan:
    """Check a StartBatchOperation request in Temporal's order and with its messages.

    Raises:
        InvalidArgument: no job id, no reason, no operation, no query nor runs, or both.
        Unimplemented: an operation on activities or on workflow options.
    """
    if not request.job_id:
        raise InvalidArgument("JobId is not set on request.")
    if len(request.job_id) > MAX_ID_LENGTH:
        raise InvalidArgument("JobId length exceeds limit.")
    chosen = request.WhichOneof("operation")
    targets = [Target(e.workflow_id, e.run_id) for e in request.executions]
    for e in request.target_executions:
        if e.type not in (ExecutionType.EXECUTION_TYPE_UNSPECIFIED, ExecutionType.EXECUTION_TYPE_WORKFLOW):
            raise Unimplemented("Perdura does not run batch operations on standalone activities yet.")
        targets.append(Target(e.business_id, e.run_id))
    sources = [bool(request.visibility_query), bool(request.executions), bool(request.target_executions)]
    if chosen is None or not request.reason or not request.namespace or not any(sources):
        raise InvalidArgument(
            "must provide required parameters: BatchType,Reason,Namespace, AND one of "
            "(Query OR Executions OR TargetExecutions)"
        )
    if sum(sources) > 1:
        raise InvalidArgument("visibility query, executions, and target executions are mutually exclusive")
    if chosen in UNSUPPORTED:
        raise Unimplemented(f"Perdura does not run the batch operation {chosen} yet.")
    for t in targets:
        if not t.workflow_id:
            raise InvalidArgument("WorkflowId is not set on request.")
        if len(t.workflow_id) > MAX_ID_LENGTH:
            raise InvalidArgument("WorkflowId length exceeds limit.")
        if is_activity_host(t.workflow_id):  # a standalone activity's run: no workflow operation reaches it
            raise InvalidArgument("WorkflowId may not begin with the control character U+001F")
    rps = request.max_operations_per_second
    if not math.isfinite(rps) or rps < 0:
        raise InvalidArgument(f"Invalid max_operations_per_second: {rps} is not a non-negative number.")
    if chosen == "signal_operation" and not request.signal_operation.signal:
        raise InvalidArgument("SignalName is not set on request.")
    if chosen in ("unpause_activities_operation", "reset_activities_operation"):
        activities = getattr(request, chosen)
        if activities.WhichOneof("activity") is None or (
            activities.WhichOneof("activity") == "type" and not activities.type
        ):
            raise InvalidArgument("Either activity type or match_all must be set on the batch operation.")
    return StartPlan(
        operation_type=OPERATIONS[chosen],
        operation_field=chosen,
        query=request.visibility_query,
        targets=tuple(_unique(targets)),
        identity=_identity(request, chosen),
    )


def _unique(targets: Sequence[Target]) -> list[Target]:
    """The targets in their order, each once (a run listed twice is acted on once)."""
    seen: set[Target] = set()
    kept = []
    for t in targets:
        if t not in seen:
            seen.add(t)
            kept.append(t)
    return kept


def effective_rps(requested: float, cap: float) -> float:
    """The batch's rate: what it asked for, at most the installation's cap (the cap when it asked none)."""
    return min(requested, cap) if requested > 0 else cap


def may_act(paced_until: datetime, now: datetime) -> bool:
    """Whether the batch may take its next action now."""
    return paced_until <= now


def after_action(paced_until: datetime, now: datetime, rps: float) -> datetime:
    """When the batch's next action may run: one interval after the last one's allowance, never more
    than a second's worth behind `now` (a batch that waited catches up at most one second)."""
    return max(paced_until, now - BURST) + timedelta(seconds=1 / rps)


def wake_at(paced_until: datetime) -> datetime:
    """When to look at a batch that must wait for its next action."""
    return paced_until + WAKE_SLACK
