"""Child workflows and requests to other runs: the commands, and the outcomes recorded back on this run.

The work on the other run (starting the child, signalling, cancelling) happens in transfer rows
processed after commit (DESIGN.md rule 3); these functions only record what this run asked for and
what came of it, so no transaction ever locks two runs.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message
from temporalio.api.command.v1 import (
    RequestCancelExternalWorkflowExecutionCommandAttributes,
    SignalExternalWorkflowExecutionCommandAttributes,
    StartChildWorkflowExecutionCommandAttributes,
)
from temporalio.api.common.v1 import Header, WorkflowExecution, WorkflowType
from temporalio.api.enums.v1 import (
    CancelExternalWorkflowExecutionFailedCause,
    EventType,
    ParentClosePolicy,
    SignalExternalWorkflowExecutionFailedCause,
    StartChildWorkflowExecutionFailedCause,
    TaskQueueKind,
    WorkflowTaskFailedCause,
)
from temporalio.api.history.v1 import (
    ChildWorkflowExecutionCanceledEventAttributes,
    ChildWorkflowExecutionCompletedEventAttributes,
    ChildWorkflowExecutionFailedEventAttributes,
    ChildWorkflowExecutionStartedEventAttributes,
    ChildWorkflowExecutionTerminatedEventAttributes,
    ChildWorkflowExecutionTimedOutEventAttributes,
    ExternalWorkflowExecutionCancelRequestedEventAttributes,
    ExternalWorkflowExecutionSignaledEventAttributes,
    HistoryEvent,
    RequestCancelExternalWorkflowExecutionFailedEventAttributes,
    RequestCancelExternalWorkflowExecutionInitiatedEventAttributes,
    SignalExternalWorkflowExecutionFailedEventAttributes,
    SignalExternalWorkflowExecutionInitiatedEventAttributes,
    StartChildWorkflowExecutionFailedEventAttributes,
    StartChildWorkflowExecutionInitiatedEventAttributes,
)
from temporalio.api.taskqueue.v1 import TaskQueue

from engine.history import limits, retry_jitter, subjects, workflow_task
from engine.history.errors import CommandFailure, StaleTask
from engine.history.events import attributes, duration, new_event, seconds
from engine.history.machines import ChildState, transition
from engine.history.mutation import Mutation, TransferKind
from engine.history.state import ChildInfo, ExternalRequest
from engine.schedules.rules import scheduled_by
from visibility.divisions import is_activity_host

_RESERVED_ID = "WorkflowId may not begin with the control character U+001F (standalone activities use it)."
_BAD_CHILD = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_CHILD_EXECUTION_ATTRIBUTES
_BAD_SIGNAL = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SIGNAL_WORKFLOW_EXECUTION_ATTRIBUTES
_BAD_CANCEL = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_ATTRIBUTES


def _same_namespace(m: Mutation, namespace: str, cause: int) -> None:
    if namespace and namespace != m.state.namespace:
        raise CommandFailure(
            cause, f"Perdura does not support commands across namespaces ({namespace!r}) yet."
        )


def start_child(
    m: Mutation, *, completed_event_id: int, attrs: StartChildWorkflowExecutionCommandAttributes
) -> None:
    state = m.state
    _same_namespace(m, attrs.namespace, _BAD_CHILD)
    if not attrs.workflow_id:
        raise CommandFailure(_BAD_CHILD, "Required field WorkflowId is not set on command.")
    if is_activity_host(attrs.workflow_id):
        raise CommandFailure(_BAD_CHILD, _RESERVED_ID)
    if len(attrs.workflow_id) > 1000 or len(attrs.workflow_type.name) > 1000:
        raise CommandFailure(_BAD_CHILD, "WorkflowId or WorkflowType exceeds length limit.")
    if not attrs.workflow_type.name:
        raise CommandFailure(_BAD_CHILD, "Required field WorkflowType is not set on command.")
    if attrs.cron_schedule:
        raise CommandFailure(_BAD_CHILD, "cron_schedule is not supported by Perdura yet.")
    jitter_problem = retry_jitter.header_problem(attrs.header if attrs.HasField("header") else None)
    if jitter_problem is not None:
        raise CommandFailure(_BAD_CHILD, jitter_problem)
    if len(state.children) >= limits.PENDING_CHILDREN:
        raise CommandFailure(
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_PENDING_CHILD_WORKFLOWS_LIMIT_EXCEEDED,
            f"the workflow already has {limits.PENDING_CHILDREN} pending child workflows, the most a run may have",
        )
    # Timeouts as Temporal defaults them for a child: run timeout capped by the execution timeout,
    # task timeout 10 s by default, capped at 120 s and at the run timeout.
    execution_timeout = seconds(attrs.workflow_execution_timeout)
    run_timeout = seconds(attrs.workflow_run_timeout)
    if run_timeout == 0 or (execution_timeout > 0 and run_timeout > execution_timeout):
        run_timeout = execution_timeout
    task_timeout = min(seconds(attrs.workflow_task_timeout) or 10.0, 120.0)
    if run_timeout > 0:
        task_timeout = min(task_timeout, run_timeout)
    initiated = StartChildWorkflowExecutionInitiatedEventAttributes(
        namespace=state.namespace,
        namespace_id=state.namespace_id,
        workflow_id=attrs.workflow_id,
        workflow_type=attrs.workflow_type,
        task_queue=TaskQueue(
            name=attrs.task_queue.name or state.task_queue,
            kind=attrs.task_queue.kind or TaskQueueKind.TASK_QUEUE_KIND_NORMAL,
        ),
        input=attrs.input if attrs.HasField("input") else None,
        workflow_execution_timeout=attrs.workflow_execution_timeout
        if attrs.HasField("workflow_execution_timeout")
        else None,
        workflow_run_timeout=duration(run_timeout),
        workflow_task_timeout=duration(task_timeout),
        parent_close_policy=attrs.parent_close_policy or ParentClosePolicy.PARENT_CLOSE_POLICY_TERMINATE,
        control=attrs.control,
        workflow_task_completed_event_id=completed_event_id,
        workflow_id_reuse_policy=attrs.workflow_id_reuse_policy,
        retry_policy=attrs.retry_policy if attrs.HasField("retry_policy") else None,
        header=attrs.header if attrs.HasField("header") else None,
        memo=attrs.memo if attrs.memo.fields else None,
        search_attributes=subjects.inherited(
            state.search_attributes,
            attrs.search_attributes if attrs.search_attributes.indexed_fields else None,
        ),
        priority=attrs.priority if attrs.HasField("priority") else None,
        inherit_build_id=attrs.inherit_build_id,
    )
    event = m.add(new_event(initiated))
    state.children[event.event_id] = ChildInfo(
        initiated_event_id=event.event_id,
        workflow_id=attrs.workflow_id,
        workflow_type=attrs.workflow_type.name,
        parent_close_policy=initiated.parent_close_policy,
    )
    m.transfer(TransferKind.START_CHILD, event.event_id, initiated.SerializeToString())


def _child(m: Mutation, initiated_event_id: int) -> ChildInfo:
    child = m.state.children.get(initiated_event_id) if m.state.running else None
    if child is None:
        raise StaleTask("child no longer pending")
    return child


def child_started(m: Mutation, *, initiated_event_id: int, run_id: str, header: Header | None = None) -> None:
    child = _child(m, initiated_event_id)
    if child.state is ChildState.STARTED:
        raise StaleTask("child start already recorded")
    with transition(child, {ChildState.INITIATED}, ChildState.STARTED):
        child.run_id = run_id
    event = m.add_external(
        new_event(
            ChildWorkflowExecutionStartedEventAttributes(
                namespace=m.state.namespace,
                namespace_id=m.state.namespace_id,
                initiated_event_id=initiated_event_id,
                workflow_execution=WorkflowExecution(workflow_id=child.workflow_id, run_id=run_id),
                workflow_type=WorkflowType(name=child.workflow_type),
                header=header,
            )
        )
    )
    if event is not None:
        child.started_event_id = event.event_id
    workflow_task.schedule(m)


def child_start_failed(m: Mutation, *, initiated_event_id: int, cause: int, initiated: HistoryEvent) -> None:
    child = _child(m, initiated_event_id)
    attrs = initiated.start_child_workflow_execution_initiated_event_attributes
    with transition(child, {ChildState.INITIATED}, ChildState.CLOSED):
        del m.state.children[initiated_event_id]
    m.add_external(
        new_event(
            StartChildWorkflowExecutionFailedEventAttributes(
                namespace=m.state.namespace,
                namespace_id=m.state.namespace_id,
                workflow_id=child.workflow_id,
                workflow_type=attrs.workflow_type,
                cause=StartChildWorkflowExecutionFailedCause.ValueType(cause),
                control=attrs.control,
                initiated_event_id=initiated_event_id,
                workflow_task_completed_event_id=attrs.workflow_task_completed_event_id,
            )
        )
    )
    workflow_task.schedule(m)


def child_closed(m: Mutation, *, initiated_event_id: int, close: HistoryEvent) -> None:
    """The child's run chain ended: record its outcome with the child's close event as the source."""
    child = _child(m, initiated_event_id)
    common: dict[str, Any] = {
        "namespace": m.state.namespace,
        "namespace_id": m.state.namespace_id,
        "workflow_execution": WorkflowExecution(workflow_id=child.workflow_id, run_id=child.run_id),
        "workflow_type": {"name": child.workflow_type},
        "initiated_event_id": initiated_event_id,
        "started_event_id": child.started_event_id,
    }
    kind = close.event_type
    attrs: Message
    if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        completed = close.workflow_execution_completed_event_attributes
        attrs = ChildWorkflowExecutionCompletedEventAttributes(
            result=completed.result if completed.HasField("result") else None, **common
        )
    elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
        failed = close.workflow_execution_failed_event_attributes
        attrs = ChildWorkflowExecutionFailedEventAttributes(
            failure=failed.failure, retry_state=failed.retry_state, **common
        )
    elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
        canceled = close.workflow_execution_canceled_event_attributes
        attrs = ChildWorkflowExecutionCanceledEventAttributes(
            details=canceled.details if canceled.HasField("details") else None, **common
        )
    elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
        attrs = ChildWorkflowExecutionTimedOutEventAttributes(
            retry_state=close.workflow_execution_timed_out_event_attributes.retry_state, **common
        )
    else:
        attrs = ChildWorkflowExecutionTerminatedEventAttributes(**common)
    # A child may close before its parent records it started (the start and the record are two changes).
    with transition(child, {ChildState.INITIATED, ChildState.STARTED}, ChildState.CLOSED):
        del m.state.children[initiated_event_id]
    m.add_external(new_event(attrs))
    workflow_task.schedule(m)


def signal_external(
    m: Mutation, *, completed_event_id: int, attrs: SignalExternalWorkflowExecutionCommandAttributes
) -> None:
    _same_namespace(m, attrs.namespace, _BAD_SIGNAL)
    if not attrs.execution.workflow_id:
        raise CommandFailure(_BAD_SIGNAL, "Required field WorkflowId is not set on command.")
    if is_activity_host(attrs.execution.workflow_id):
        raise CommandFailure(_BAD_SIGNAL, _RESERVED_ID)
    if not attrs.signal_name:
        raise CommandFailure(_BAD_SIGNAL, "SignalName is not set on command.")
    if len(m.state.external_signals) >= limits.PENDING_SIGNALS:
        raise CommandFailure(
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_PENDING_SIGNALS_LIMIT_EXCEEDED,
            f"the workflow already has {limits.PENDING_SIGNALS} pending external signals, the most a run may have",
        )
    initiated = SignalExternalWorkflowExecutionInitiatedEventAttributes(
        workflow_task_completed_event_id=completed_event_id,
        namespace=m.state.namespace,
        namespace_id=m.state.namespace_id,
        workflow_execution=attrs.execution,
        signal_name=attrs.signal_name,
        input=attrs.input if attrs.HasField("input") else None,
        control=attrs.control,
        child_workflow_only=attrs.child_workflow_only,
        header=attrs.header if attrs.HasField("header") else None,
    )
    event = m.add(new_event(initiated))
    m.state.external_signals[event.event_id] = ExternalRequest(
        initiated_event_id=event.event_id,
        workflow_id=attrs.execution.workflow_id,
        run_id=attrs.execution.run_id,
        control=attrs.control,
    )
    m.transfer(TransferKind.SIGNAL_EXTERNAL, event.event_id, initiated.SerializeToString())


def request_cancel_external(
    m: Mutation, *, completed_event_id: int, attrs: RequestCancelExternalWorkflowExecutionCommandAttributes
) -> None:
    _same_namespace(m, attrs.namespace, _BAD_CANCEL)
    if not attrs.workflow_id:
        raise CommandFailure(_BAD_CANCEL, "Required field WorkflowId is not set on command.")
    if is_activity_host(attrs.workflow_id):
        raise CommandFailure(_BAD_CANCEL, _RESERVED_ID)
    if len(m.state.external_cancels) >= limits.PENDING_CANCEL_REQUESTS:
        raise CommandFailure(
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_PENDING_REQUEST_CANCEL_LIMIT_EXCEEDED,
            f"the workflow already has {limits.PENDING_CANCEL_REQUESTS} pending cancel requests, the most a run may have",
        )
    initiated = RequestCancelExternalWorkflowExecutionInitiatedEventAttributes(
        workflow_task_completed_event_id=completed_event_id,
        namespace=m.state.namespace,
        namespace_id=m.state.namespace_id,
        workflow_execution=WorkflowExecution(workflow_id=attrs.workflow_id, run_id=attrs.run_id),
        control=attrs.control,
        child_workflow_only=attrs.child_workflow_only,
        reason=attrs.reason,
    )
    event = m.add(new_event(initiated))
    m.state.external_cancels[event.event_id] = ExternalRequest(
        initiated_event_id=event.event_id,
        workflow_id=attrs.workflow_id,
        run_id=attrs.run_id,
        control=attrs.control,
    )
    m.transfer(TransferKind.CANCEL_EXTERNAL, event.event_id, initiated.SerializeToString())


def external_outcome(m: Mutation, *, initiated_event_id: int, signal: bool, failed_cause: int = 0) -> None:
    """Record how a signal or cancel request to another run went (failed_cause 0 means delivered)."""
    pending = m.state.external_signals if signal else m.state.external_cancels
    request = pending.get(initiated_event_id) if m.state.running else None
    if request is None:
        raise StaleTask("external request no longer pending")
    del pending[initiated_event_id]
    target = WorkflowExecution(workflow_id=request.workflow_id, run_id=request.run_id)
    common: dict[str, Any] = {
        "namespace": m.state.namespace,
        "namespace_id": m.state.namespace_id,
        "workflow_execution": target,
    }
    attrs: Message
    if signal and not failed_cause:
        attrs = ExternalWorkflowExecutionSignaledEventAttributes(
            initiated_event_id=initiated_event_id, control=request.control, **common
        )
    elif signal:
        attrs = SignalExternalWorkflowExecutionFailedEventAttributes(
            cause=SignalExternalWorkflowExecutionFailedCause.ValueType(failed_cause),
            initiated_event_id=initiated_event_id,
            control=request.control,
            **common,
        )
    elif not failed_cause:
        attrs = ExternalWorkflowExecutionCancelRequestedEventAttributes(
            initiated_event_id=initiated_event_id, **common
        )
    else:
        attrs = RequestCancelExternalWorkflowExecutionFailedEventAttributes(
            cause=CancelExternalWorkflowExecutionFailedCause.ValueType(failed_cause),
            initiated_event_id=initiated_event_id,
            control=request.control,
            **common,
        )
    m.add_external(new_event(attrs))
    workflow_task.schedule(m)


def on_close(m: Mutation, close_event: HistoryEvent) -> None:
    """Transfers a closing run owes others: its parent learns the outcome; children follow their policy."""
    state = m.state
    attrs = attributes(close_event)
    # A run that hands over to the next of its chain (continue-as-new, retry, cron) is not the end.
    hands_over = bool(getattr(attrs, "new_execution_run_id", ""))
    if state.parent is not None and not hands_over:
        m.transfer(TransferKind.CHILD_CLOSED, close_event.event_id, close_event.SerializeToString())
    if not hands_over and scheduled_by(state.search_attributes) is not None:
        # The schedule that started this run waits for it (overlap policy, last result, pause on failure).
        m.transfer(TransferKind.SCHEDULE_RUN_CLOSED, close_event.event_id)
    for child in state.children.values():
        if child.parent_close_policy in (
            ParentClosePolicy.PARENT_CLOSE_POLICY_TERMINATE,
            ParentClosePolicy.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
        ):
            m.transfer(TransferKind.PARENT_CLOSE_POLICY, child.initiated_event_id)
