"""Run lifecycle transitions: start, signal, cancel request, terminate, timeouts and the close commands."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio.api.command.v1 import (
    CancelWorkflowExecutionCommandAttributes,
    CompleteWorkflowExecutionCommandAttributes,
    ContinueAsNewWorkflowExecutionCommandAttributes,
    FailWorkflowExecutionCommandAttributes,
)
from temporalio.api.common.v1 import Memo, Payloads, SearchAttributes, WorkflowExecution, WorkflowType
from temporalio.api.enums.v1 import (
    ContinueAsNewInitiator,
    RetryState,
    TaskQueueKind,
    TimeoutType,
    WorkflowExecutionStatus,
)
from temporalio.api.failure.v1 import Failure, TimeoutFailureInfo
from temporalio.api.history.v1 import (
    HistoryEvent,
    WorkflowExecutionCanceledEventAttributes,
    WorkflowExecutionCancelRequestedEventAttributes,
    WorkflowExecutionCompletedEventAttributes,
    WorkflowExecutionContinuedAsNewEventAttributes,
    WorkflowExecutionFailedEventAttributes,
    WorkflowExecutionSignaledEventAttributes,
    WorkflowExecutionStartedEventAttributes,
    WorkflowExecutionTerminatedEventAttributes,
    WorkflowExecutionTimedOutEventAttributes,
)
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine.history import children, cron, limits, retry, updates, workflow_task
from engine.history.errors import RunClosed, StaleTask
from engine.history.events import duration, new_event, seconds
from engine.history.mutation import Mutation, TimerKind
from engine.history.state import MutableState, ParentInfo
from engine.history.workflow_task import HISTORY_SERVICE_IDENTITY

DEFAULT_WORKFLOW_TASK_TIMEOUT = 10.0
MAX_WORKFLOW_TASK_TIMEOUT = 120.0
MAX_SIGNAL_REQUEST_IDS = 100


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
    schedule_first_task: bool = True,
    continuation: Continuation | None = None,
    first_task_backoff: float = 0.0,
    parent: ParentInfo | None = None,
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
    m = Mutation(state, now)
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
        attrs.initiator = continuation.initiator
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


def continue_as_new(
    m: Mutation,
    *,
    completed_event_id: int,
    attrs: ContinueAsNewWorkflowExecutionCommandAttributes,
    new_run_id: str,
) -> Mutation:
    """Close this run as ContinuedAsNew and start the next one; returns the new run's mutation.

    Unset fields are inherited from this run: type, task queue, timeouts, memo, search attributes, header.
    """
    state = m.state
    request = StartWorkflowExecutionRequest(
        namespace=state.namespace,
        workflow_id=state.workflow_id,
        workflow_type=attrs.workflow_type
        if attrs.workflow_type.name
        else WorkflowType(name=state.workflow_type),
        task_queue=TaskQueue(name=attrs.task_queue.name or state.task_queue),
        input=attrs.input if attrs.HasField("input") else None,
        workflow_run_timeout=attrs.workflow_run_timeout
        if attrs.HasField("workflow_run_timeout") and seconds(attrs.workflow_run_timeout)
        else duration(state.run_timeout),
        workflow_task_timeout=attrs.workflow_task_timeout
        if attrs.HasField("workflow_task_timeout") and seconds(attrs.workflow_task_timeout)
        else duration(state.workflow_task_timeout),
        workflow_execution_timeout=duration(state.execution_timeout),
        identity=HISTORY_SERVICE_IDENTITY,
        request_id=new_run_id,
        retry_policy=attrs.retry_policy if attrs.HasField("retry_policy") else None,
        cron_schedule=attrs.cron_schedule,
        header=attrs.header if attrs.HasField("header") else None,
        memo=attrs.memo if attrs.HasField("memo") else (Memo.FromString(state.memo) if state.memo else None),
        search_attributes=attrs.search_attributes
        if attrs.HasField("search_attributes")
        else (SearchAttributes.FromString(state.search_attributes) if state.search_attributes else None),
    )
    if state.start_attrs:
        started = WorkflowExecutionStartedEventAttributes.FromString(state.start_attrs)
        if started.HasField("priority"):
            request.priority.CopyFrom(started.priority)
    backoff = min_backoff(m, seconds(attrs.backoff_start_interval))
    initiator = attrs.initiator or ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_WORKFLOW
    close(
        m,
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW,
        new_event(
            WorkflowExecutionContinuedAsNewEventAttributes(
                new_execution_run_id=new_run_id,
                workflow_type=request.workflow_type,
                task_queue=TaskQueue(name=request.task_queue.name, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
                input=request.input if request.HasField("input") else None,
                workflow_run_timeout=request.workflow_run_timeout,
                workflow_task_timeout=request.workflow_task_timeout,
                workflow_task_completed_event_id=completed_event_id,
                backoff_start_interval=attrs.backoff_start_interval
                if attrs.HasField("backoff_start_interval")
                else None,
                initiator=initiator,
                failure=attrs.failure if attrs.HasField("failure") else None,
                last_completion_result=attrs.last_completion_result
                if attrs.HasField("last_completion_result")
                else None,
                header=request.header if request.HasField("header") else None,
                memo=request.memo if request.HasField("memo") else None,
                search_attributes=request.search_attributes
                if request.HasField("search_attributes")
                else None,
            )
        ),
    )
    state.new_execution_run_id = new_run_id
    return _start_continuation(
        m,
        request=request,
        initiator=initiator,
        attempt=1,
        delay=backoff,
        failure=attrs.failure if attrs.HasField("failure") else None,
        last_completion_result=attrs.last_completion_result
        if attrs.HasField("last_completion_result")
        else None,
    )


def close(m: Mutation, status: int, event: HistoryEvent) -> None:
    """Write the close event and drop everything pending: nothing runs for a closed run."""
    state = m.state
    added = m.add(event)
    state.status = status
    state.close_time = m.now
    state.close_event_id = added.event_id
    children.on_close(m, added)
    updates.on_close(state)
    state.workflow_task = None
    state.activities = {}
    state.timers = {}
    state.buffered = []
    m.closed = True


def _require_running(state: MutableState) -> None:
    if not state.running:
        raise RunClosed("workflow execution already completed")


def signal(
    m: Mutation,
    *,
    signal_name: str,
    input: Payloads | None,
    identity: str,
    request_id: str,
    header: object | None = None,
) -> None:
    """Deliver a signal (deduplicated by request id) and make sure a workflow task will see it."""
    state = m.state
    _require_running(state)
    if request_id:
        if request_id in state.signal_request_ids:
            return
        state.signal_request_ids = [*state.signal_request_ids[-(MAX_SIGNAL_REQUEST_IDS - 1) :], request_id]
    attrs = WorkflowExecutionSignaledEventAttributes(
        signal_name=signal_name, identity=identity, request_id=request_id
    )
    if input is not None and input.payloads:
        attrs.input.CopyFrom(input)
    if header is not None:
        attrs.header.CopyFrom(header)  # type: ignore[arg-type]
    m.add_external(new_event(attrs))
    workflow_task.schedule(m)


def request_cancel(m: Mutation, *, identity: str, reason: str) -> None:
    """Ask the workflow to cancel itself; a second request is a no-op, as in Temporal."""
    state = m.state
    if not state.running or state.cancel_requested:
        return  # Temporal answers OK and writes nothing for a closed or already cancel-requested run
    state.cancel_requested = True
    m.add_external(
        new_event(WorkflowExecutionCancelRequestedEventAttributes(cause=reason, identity=identity))
    )
    workflow_task.schedule(m)


DEFAULT_TERMINATE_REASON = "terminated by user via frontend"


def terminate(m: Mutation, *, reason: str, details: Payloads | None, identity: str) -> None:
    _require_running(m.state)
    reason = reason or DEFAULT_TERMINATE_REASON
    workflow_task.fail_for_close(m)
    close(
        m,
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TERMINATED,
        new_event(
            WorkflowExecutionTerminatedEventAttributes(
                reason=reason,
                details=details if details is not None and details.payloads else None,
                identity=identity,
            )
        ),
    )


def run_timeout(m: Mutation) -> None:
    """The run-timeout timer fired."""
    state = m.state
    if not state.running:
        raise StaleTask("run closed")
    if state.run_expiration is not None and state.run_expiration > m.now:
        raise StaleTask("run timeout not yet due")
    workflow_task.fail_for_close(m)
    # Reaching the execution's own deadline is a timeout of the whole chain; a run timeout alone is not,
    # and the retry policy (if any) decides whether another attempt starts.
    expired = state.execution_expiration is not None and state.execution_expiration <= m.now
    failure = Failure(
        message="workflow timeout",
        source="Server",
        timeout_failure_info=TimeoutFailureInfo(timeout_type=TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE),
    )
    decision = None if expired else _retry_decision(m, failure)
    if expired:
        retry_state = RetryState.RETRY_STATE_TIMEOUT
    else:
        retry_state = (
            decision.retry_state if decision is not None else RetryState.RETRY_STATE_RETRY_POLICY_NOT_SET
        )
    retrying = decision is not None and decision.retry
    cron_next = not retrying and not expired and bool(_cron_schedule(state))
    new_run_id = m.new_run_id() if retrying or cron_next else ""
    close(
        m,
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
        new_event(
            WorkflowExecutionTimedOutEventAttributes(retry_state=retry_state, new_execution_run_id=new_run_id)
        ),
    )
    if new_run_id:
        state.new_execution_run_id = new_run_id
        if cron_next:
            m.continued = _cron_run(m, new_run_id=new_run_id, result=None, failure=failure)
        else:
            assert decision is not None
            m.continued = _retry_run(m, new_run_id=new_run_id, failure=failure, delay=decision.delay)


def complete(
    m: Mutation, *, completed_event_id: int, attrs: CompleteWorkflowExecutionCommandAttributes
) -> None:
    new_run_id = m.new_run_id() if _cron_schedule(m.state) else ""
    close(
        m,
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED,
        new_event(
            WorkflowExecutionCompletedEventAttributes(
                result=attrs.result if attrs.HasField("result") else None,
                workflow_task_completed_event_id=completed_event_id,
                new_execution_run_id=new_run_id,
            )
        ),
    )
    if new_run_id:
        m.state.new_execution_run_id = new_run_id
        m.continued = _cron_run(
            m, new_run_id=new_run_id, result=attrs.result if attrs.HasField("result") else None, failure=None
        )


def _retry_decision(m: Mutation, failure: Failure) -> retry.RetryDecision | None:
    """What the run's retry policy says about this failure (None: the run has no retry policy)."""
    state = m.state
    started = (
        WorkflowExecutionStartedEventAttributes.FromString(state.start_attrs) if state.start_attrs else None
    )
    if started is None or not started.HasField("retry_policy"):
        return None
    try:
        policy = retry.normalized(started.retry_policy)
    except retry.RetryPolicyError:
        return None
    return retry.decide(
        policy=policy,
        attempt=state.attempt,
        failure=failure,
        now=m.now,
        expiration=state.execution_expiration,
    )


def _retry_run(m: Mutation, *, new_run_id: str, failure: Failure, delay: float) -> Mutation:
    """The next attempt of this run: same input and options, attempt + 1, after the policy's backoff."""
    return _next_run(
        m,
        new_run_id=new_run_id,
        initiator=ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_RETRY,
        attempt=m.state.attempt + 1,
        delay=min_backoff(m, delay),
        failure=failure,
    )


def min_backoff(m: Mutation, backoff: float) -> float:
    """Runs of one workflow id start at least a second apart, so a tight retry or continue-as-new loop
    cannot spin (Temporal's history.workflowIdReuseMinimalInterval)."""
    lifetime = (m.now - m.state.execution_time).total_seconds()
    if lifetime + backoff < limits.RUN_MIN_INTERVAL:
        return limits.RUN_MIN_INTERVAL - lifetime
    return backoff


def _cron_run(m: Mutation, *, new_run_id: str, result: Payloads | None, failure: Failure | None) -> Mutation:
    """The next run of a cron chain, at the schedule's next time, told how the last one ended."""
    started = WorkflowExecutionStartedEventAttributes.FromString(m.state.start_attrs)
    last_result = result
    if last_result is None and started.HasField("last_completion_result"):
        last_result = started.last_completion_result  # a failed run passes the last success on
    return _next_run(
        m,
        new_run_id=new_run_id,
        initiator=ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_CRON_SCHEDULE,
        attempt=1,
        delay=cron.next_backoff(started.cron_schedule, m.now),
        failure=failure,
        last_completion_result=last_result,
    )


def _cron_schedule(state: MutableState) -> str:
    if not state.start_attrs:
        return ""
    return WorkflowExecutionStartedEventAttributes.FromString(state.start_attrs).cron_schedule


def _next_run(
    m: Mutation,
    *,
    new_run_id: str,
    initiator: int,
    attempt: int,
    delay: float,
    failure: Failure | None,
    last_completion_result: Payloads | None = None,
) -> Mutation:
    state = m.state
    started = WorkflowExecutionStartedEventAttributes.FromString(state.start_attrs)
    request = StartWorkflowExecutionRequest(
        namespace=state.namespace,
        workflow_id=state.workflow_id,
        workflow_type=started.workflow_type,
        task_queue=TaskQueue(name=state.task_queue),
        input=started.input if started.HasField("input") else None,
        workflow_run_timeout=duration(state.run_timeout) if state.run_timeout else None,
        workflow_task_timeout=duration(state.workflow_task_timeout),
        workflow_execution_timeout=duration(state.execution_timeout),
        identity=started.identity,
        request_id=new_run_id,
        priority=started.priority if started.HasField("priority") else None,
        retry_policy=started.retry_policy if started.HasField("retry_policy") else None,
        cron_schedule=started.cron_schedule,
        header=started.header if started.HasField("header") else None,
        memo=Memo.FromString(state.memo) if state.memo else None,
        search_attributes=SearchAttributes.FromString(state.search_attributes)
        if state.search_attributes
        else None,
    )
    return _start_continuation(
        m,
        request=request,
        initiator=initiator,
        attempt=attempt,
        delay=delay,
        failure=failure,
        last_completion_result=last_completion_result,
    )


def _start_continuation(
    m: Mutation,
    *,
    request: StartWorkflowExecutionRequest,
    initiator: int,
    attempt: int,
    delay: float,
    failure: Failure | None,
    last_completion_result: Payloads | None,
) -> Mutation:
    """Start the next run of this chain (continue-as-new, retry, cron) from `request`, carrying the chain."""
    state = m.state
    return start(
        namespace_id=state.namespace_id,
        namespace=state.namespace,
        run_id=request.request_id,
        request=request,
        now=m.now,
        continuation=Continuation(
            previous_run_id=state.run_id,
            first_run_id=state.first_run_id,
            initiator=initiator,
            execution_expiration=state.execution_expiration,
            execution_timeout=state.execution_timeout,
            continued_failure=failure,
            last_completion_result=last_completion_result,
            attempt=attempt,
        ),
        first_task_backoff=delay,
        parent=state.parent,
    )


def fail(m: Mutation, *, completed_event_id: int, attrs: FailWorkflowExecutionCommandAttributes) -> None:
    decision = _retry_decision(m, attrs.failure)
    retrying = decision is not None and decision.retry
    cron_next = not retrying and bool(_cron_schedule(m.state))
    new_run_id = m.new_run_id() if retrying or cron_next else ""
    close(
        m,
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_FAILED,
        new_event(
            WorkflowExecutionFailedEventAttributes(
                failure=attrs.failure,
                retry_state=decision.retry_state
                if decision is not None
                else RetryState.RETRY_STATE_RETRY_POLICY_NOT_SET,
                workflow_task_completed_event_id=completed_event_id,
                new_execution_run_id=new_run_id,
            )
        ),
    )
    if new_run_id:
        m.state.new_execution_run_id = new_run_id
        if cron_next:
            m.continued = _cron_run(m, new_run_id=new_run_id, result=None, failure=attrs.failure)
        else:
            assert decision is not None
            m.continued = _retry_run(m, new_run_id=new_run_id, failure=attrs.failure, delay=decision.delay)


def cancel(m: Mutation, *, completed_event_id: int, attrs: CancelWorkflowExecutionCommandAttributes) -> None:
    close(
        m,
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CANCELED,
        new_event(
            WorkflowExecutionCanceledEventAttributes(
                workflow_task_completed_event_id=completed_event_id,
                details=attrs.details if attrs.HasField("details") else None,
            )
        ),
    )
