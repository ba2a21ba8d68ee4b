"""The next run of a chain: continue-as-new, a retry under the run's retry policy, a cron run."""

from __future__ import annotations

from temporalio.api.command.v1 import ContinueAsNewWorkflowExecutionCommandAttributes
from temporalio.api.common.v1 import Memo, Payloads, WorkflowType
from temporalio.api.enums.v1 import ContinueAsNewInitiator, RetryState, TaskQueueKind, WorkflowExecutionStatus
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import (
    WorkflowExecutionContinuedAsNewEventAttributes,
    WorkflowExecutionStartedEventAttributes,
)
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine.history import (
    cron,
    limits,
    parking,
    pause,
    pause_info,
    retry,
    retry_jitter,
    subjects,
    versioning,
    versioning_attributes,
)
from engine.history.events import duration, new_event, seconds
from engine.history.lifecycle.closing import close
from engine.history.lifecycle.run_start import Continuation, start
from engine.history.mutation import Mutation
from engine.history.state import MutableState
from engine.history.workflow_task import HISTORY_SERVICE_IDENTITY


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
        search_attributes=subjects.inherited(state.search_attributes, attrs.search_attributes)
        if attrs.HasField("search_attributes")
        else pause_info.inheritable(state.search_attributes),
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
                # Temporal echoes the command's initiator and build-id inheritance here (an SDK leaves the
                # initiator unset); the next run's start event names the workflow as its initiator.
                initiator=attrs.initiator,
                inherit_build_id=attrs.inherit_build_id,
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
        new_run_id=new_run_id,
    )
    new = _start_continuation(
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
    versioning.continue_as_new(state, new.state, attrs.initial_versioning_behavior)
    if versioning.effective_version(new.state)[0]:
        versioning_attributes.index(new.state)
    return new


def retry_decision(m: Mutation, failure: Failure) -> retry.RetryDecision | None:
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
    fraction = retry_jitter.header_fraction(started.header if started.HasField("header") else None)
    return retry.decide(
        policy=policy,
        attempt=state.attempt,
        failure=failure,
        now=m.now,
        expiration=state.execution_expiration,
        jitter=m.retry_jitter if fraction is None else fraction,
        jitter_key=f"run|{state.workflow_id}|{state.run_id}|{state.attempt}",
    )


def retry_run(m: Mutation, *, new_run_id: str, failure: Failure, delay: float) -> Mutation:
    """The next attempt of this run: same input and options, attempt + 1, after the policy's backoff."""
    return _next_run(
        m,
        new_run_id=new_run_id,
        initiator=ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_RETRY,
        attempt=m.state.attempt + 1,
        delay=min_backoff(m, delay),
        failure=failure,
    )


def parks_run(m: Mutation, decision: retry.RetryDecision | None) -> bool:
    """Whether this failed or timed-out run, its workflow retries exhausted, is parked (parking.py) rather
    than left failed. A standalone activity's run fails as in Temporal, and a cron chain goes on to its
    next run, which the failure is passed to."""
    state = m.state
    if decision is None or decision.retry or state.standalone is not None or cron_schedule(state):
        return False
    if decision.retry_state != RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED:
        return False
    started = WorkflowExecutionStartedEventAttributes.FromString(state.start_attrs)
    return parking.parks(started.header if started.HasField("header") else None, m.park_on_exhausted)


def park_run(m: Mutation, *, new_run_id: str, failure: Failure) -> Mutation:
    """The parked continuation of a run whose retries are exhausted: the same input and options, attempt 1
    (a redrive gets every attempt again), started paused until an operator unpauses it."""
    attempts = m.state.attempt
    new = _next_run(
        m,
        new_run_id=new_run_id,
        initiator=ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_RETRY,
        attempt=1,
        delay=min_backoff(m, 0.0),
        failure=failure,
    )
    why = parking.reason(attempts, failure.message, redrive="an unpause")
    pause.pause(new, identity=parking.IDENTITY, reason=why, request_id="")
    parking.index(new.state)
    return new


def min_backoff(m: Mutation, backoff: float) -> float:
    """Runs of one workflow id start at least a second apart, so a tight retry or continue-as-new loop
    cannot spin (Temporal's history.workflowIdReuseMinimalInterval)."""
    lifetime = (m.now - m.state.execution_time).total_seconds()
    if lifetime + backoff < limits.RUN_MIN_INTERVAL:
        return limits.RUN_MIN_INTERVAL - lifetime
    return backoff


def cron_run(m: Mutation, *, new_run_id: str, result: Payloads | None, failure: Failure | None) -> Mutation:
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


def cron_schedule(state: MutableState) -> str:
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
        search_attributes=pause_info.inheritable(state.search_attributes),
    )
    retrying = initiator == ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_RETRY
    return _start_continuation(
        m,
        request=request,
        initiator=initiator,
        attempt=attempt,
        delay=delay,
        failure=failure,
        last_completion_result=last_completion_result,
        inherited=versioning.carried_to_retry_or_cron(state, retry=retrying),
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
    inherited: versioning.Inherited | None = None,
) -> Mutation:
    """Start the next run of this chain (continue-as-new, retry, cron) from `request`, carrying the chain
    (and what a retry or cron run keeps of the run's versioning, `inherited`)."""
    state = m.state
    return start(
        namespace_id=state.namespace_id,
        namespace=state.namespace,
        run_id=request.request_id,
        request=request,
        now=m.now,
        ids=m.ids,
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
        inherited=inherited,
    )
