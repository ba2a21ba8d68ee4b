"""A run begins: WorkflowExecutionStarted and its first workflow task (or the backoff before it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio.api.common.v1 import Payloads, WorkflowExecution
from temporalio.api.enums.v1 import ContinueAsNewInitiator, TaskQueueKind
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import WorkflowExecutionStartedEventAttributes
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine.history import versioning, versioning_attributes, workflow_task
from engine.history.errors import StaleTask
from engine.history.events import duration, new_event, seconds
from engine.history.mutation import Mutation, TimerKind
from engine.history.sources import IdSource
from engine.history.state import MutableState, ParentInfo

DEFAULT_WORKFLOW_TASK_TIMEOUT = 10.0


MAX_WORKFLOW_TASK_TIMEOUT = 120.0


def _round_ms(value: datetime) -> datetime:
    micro = round(value.microsecond / 1000) * 1000
    return value.replace(microsecond=0) + timedelta(microseconds=micro)


def effective_timeouts(request: StartWorkflowExecutionRequest) -> tuple[float, float, float]:
    """(execution, run, task) timeouts in seconds as Temporal defaults and caps them; 0 means none."""
    execution = seconds(request.workflow_execution_timeout)
    run = seconds(request.workflow_run_timeout)
    task = seconds(request.workflow_task_timeout)
    if run == 0 or (execution > 0 and run > execution):
        run = execution
    if task == 0:
        task = DEFAULT_WORKFLOW_TASK_TIMEOUT
    task = min(task, MAX_WORKFLOW_TASK_TIMEOUT)
    if run > 0:
        task = min(task, run)
    return execution, run, task


@dataclass(frozen=True, slots=True)
class Continuation:
    """Where a new run comes from when it continues an earlier one (continue-as-new)."""

    previous_run_id: str
    first_run_id: str
    initiator: int
    execution_expiration: datetime | None
    execution_timeout: float
    continued_failure: Failure | None = None
    last_completion_result: Payloads | None = None
    attempt: int = 1


def start(
    *,
    namespace_id: str,
    namespace: str,
    run_id: str,
    request: StartWorkflowExecutionRequest,
    now: datetime,
    ids: IdSource,
    schedule_first_task: bool = True,
    continuation: Continuation | None = None,
    first_task_backoff: float = 0.0,
    parent: ParentInfo | None = None,
    inherited: versioning.Inherited | None = None,
) -> Mutation:
    """A new run: WorkflowExecutionStarted, then its first workflow task (the request is validated already).

    Signal-with-start passes `schedule_first_task=False` and signals, which schedules the task after the signal.
    With a backoff (start delay, continue-as-new backoff) the first task waits for a timer instead.
    """
    execution_timeout, run_timeout, task_timeout = effective_timeouts(request)
    execution_expiration = (
        _round_ms(now + timedelta(seconds=execution_timeout + first_task_backoff))
        if execution_timeout
        else None
    )
    if continuation is not None:
        execution_timeout = continuation.execution_timeout
        execution_expiration = continuation.execution_expiration
    execution_time = now + timedelta(seconds=first_task_backoff)
    run_expiration = execution_time + timedelta(seconds=run_timeout) if run_timeout else None
    if execution_expiration is not None and (run_expiration is None or run_expiration > execution_expiration):
        run_expiration = execution_expiration
    state = MutableState(
        namespace_id=namespace_id,
        namespace=namespace,
        workflow_id=request.workflow_id,
        run_id=run_id,
        first_run_id=continuation.first_run_id if continuation else run_id,
        workflow_type=request.workflow_type.name,
        task_queue=request.task_queue.name,
        start_time=now,
        execution_time=execution_time,
        workflow_task_timeout=task_timeout,
        run_timeout=run_timeout,
        execution_timeout=execution_timeout,
        execution_expiration=execution_expiration,
        run_expiration=run_expiration,
        start_request_id=request.request_id,
        memo=request.memo.SerializeToString() if request.HasField("memo") else b"",
        search_attributes=request.search_attributes.SerializeToString()
        if request.HasField("search_attributes")
        else b"",
        awaiting_backoff=first_task_backoff > 0,
        parent=parent,
    )
    m = Mutation(state, now, ids)
    attrs = WorkflowExecutionStartedEventAttributes(
        workflow_type=request.workflow_type,
        task_queue=TaskQueue(name=request.task_queue.name, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
        input=request.input if request.HasField("input") else None,
        workflow_execution_timeout=duration(execution_timeout) if execution_timeout else None,
        workflow_run_timeout=duration(run_timeout)
        if run_timeout or request.HasField("workflow_run_timeout")
        else None,
        workflow_task_timeout=duration(task_timeout),
        original_execution_run_id=run_id,
        identity=request.identity,
        first_execution_run_id=state.first_run_id,
        retry_policy=request.retry_policy if request.HasField("retry_policy") else None,
        attempt=1,
        cron_schedule=request.cron_schedule,
        memo=request.memo if request.HasField("memo") else None,
        search_attributes=request.search_attributes if request.HasField("search_attributes") else None,
        header=request.header if request.HasField("header") else None,
        workflow_id=request.workflow_id,
        priority=request.priority if request.HasField("priority") else None,
        first_workflow_task_backoff=duration(first_task_backoff),
    )
    if continuation is not None:
        attrs.attempt = continuation.attempt
        state.attempt = continuation.attempt
    if parent is not None:
        attrs.parent_workflow_namespace = parent.namespace
        attrs.parent_workflow_namespace_id = parent.namespace_id
        attrs.parent_workflow_execution.CopyFrom(
            WorkflowExecution(workflow_id=parent.workflow_id, run_id=parent.run_id)
        )
        attrs.parent_initiated_event_id = parent.initiated_event_id
        attrs.root_workflow_execution.CopyFrom(
            WorkflowExecution(workflow_id=parent.root_workflow_id, run_id=parent.root_run_id)
        )
    if continuation is not None:
        attrs.continued_execution_run_id = continuation.previous_run_id
        attrs.initiator = ContinueAsNewInitiator.ValueType(continuation.initiator)
        if continuation.continued_failure is not None:
            attrs.continued_failure.CopyFrom(continuation.continued_failure)
        if continuation.last_completion_result is not None:
            attrs.last_completion_result.CopyFrom(continuation.last_completion_result)
    else:
        # A schedule hands its previous run's outcome to the next run it starts.
        if request.HasField("last_completion_result"):
            attrs.last_completion_result.CopyFrom(request.last_completion_result)
        if request.HasField("continued_failure"):
            attrs.continued_failure.CopyFrom(request.continued_failure)
    if state.execution_expiration is not None:
        attrs.workflow_execution_expiration_time.FromDatetime(state.execution_expiration)
    if request.HasField("versioning_override") and request.versioning_override.ByteSize():
        attrs.versioning_override.CopyFrom(request.versioning_override)
        versioning.apply_override(state, request.versioning_override)
    if inherited is not None:
        versioning.apply_inherited(state, attrs, inherited)
    if versioning.effective_version(state)[0]:
        versioning_attributes.index(state)  # a pinning override or a pinned parent's version
    state.start_attrs = attrs.SerializeToString()
    started = new_event(attrs)
    if request.HasField("user_metadata"):
        started.user_metadata.CopyFrom(request.user_metadata)
        state.user_metadata = request.user_metadata.SerializeToString()
    m.add(started)
    if first_task_backoff > 0:
        m.timer(TimerKind.WORKFLOW_BACKOFF, execution_time)
    elif schedule_first_task:
        workflow_task.schedule(m)
    if state.run_expiration is not None:
        m.timer(TimerKind.WORKFLOW_RUN_TIMEOUT, state.run_expiration)
    return m


def backoff_elapsed(m: Mutation) -> None:
    """The start delay (or continue-as-new backoff) is over: the run gets its first workflow task."""
    state = m.state
    if not state.running or not state.awaiting_backoff:
        raise StaleTask("no backoff pending")
    state.awaiting_backoff = False
    workflow_task.schedule(m)
