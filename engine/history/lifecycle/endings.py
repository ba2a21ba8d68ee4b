"""How a run ends: terminated, timed out, or closed by the workflow's complete, fail and cancel commands.

A failed or timed-out run may start its retry, and a cron run its next run, in the same change.
"""

from __future__ import annotations

from temporalio.api.command.v1 import (
    CancelWorkflowExecutionCommandAttributes,
    CompleteWorkflowExecutionCommandAttributes,
    FailWorkflowExecutionCommandAttributes,
)
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import RetryState, TimeoutType, WorkflowExecutionStatus
from temporalio.api.failure.v1 import Failure, TimeoutFailureInfo
from temporalio.api.history.v1 import (
    WorkflowExecutionCanceledEventAttributes,
    WorkflowExecutionCompletedEventAttributes,
    WorkflowExecutionFailedEventAttributes,
    WorkflowExecutionTerminatedEventAttributes,
    WorkflowExecutionTimedOutEventAttributes,
)

from engine.history import workflow_task
from engine.history.errors import StaleTask, require_running
from engine.history.events import new_event
from engine.history.lifecycle.chain import (
    cron_run,
    cron_schedule,
    park_run,
    parks_run,
    retry_decision,
    retry_run,
)
from engine.history.lifecycle.closing import close
from engine.history.mutation import Mutation

DEFAULT_TERMINATE_REASON = "terminated by user via frontend"


def terminate(m: Mutation, *, reason: str, details: Payloads | None, identity: str) -> None:
    require_running(m.state)
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
    decision = None if expired else retry_decision(m, failure)
    if expired:
        retry_state = RetryState.RETRY_STATE_TIMEOUT
    else:
        retry_state = (
            decision.retry_state if decision is not None else RetryState.RETRY_STATE_RETRY_POLICY_NOT_SET
        )
    retrying = decision is not None and decision.retry
    parked = not expired and parks_run(m, decision)
    cron_next = not retrying and not expired and bool(cron_schedule(state))
    new_run_id = m.ids.run_id() if retrying or cron_next or parked else ""
    close(
        m,
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
        new_event(
            WorkflowExecutionTimedOutEventAttributes(retry_state=retry_state, new_execution_run_id=new_run_id)
        ),
        new_run_id=new_run_id,
    )
    if new_run_id:
        if cron_next:
            m.continued = cron_run(m, new_run_id=new_run_id, result=None, failure=failure)
        elif parked:
            m.continued = park_run(m, new_run_id=new_run_id, failure=failure)
        else:
            assert decision is not None
            m.continued = retry_run(m, new_run_id=new_run_id, failure=failure, delay=decision.delay)


def complete(
    m: Mutation, *, completed_event_id: int, attrs: CompleteWorkflowExecutionCommandAttributes
) -> None:
    new_run_id = m.ids.run_id() if cron_schedule(m.state) else ""
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
        new_run_id=new_run_id,
    )
    if new_run_id:
        m.continued = cron_run(
            m, new_run_id=new_run_id, result=attrs.result if attrs.HasField("result") else None, failure=None
        )


def fail(m: Mutation, *, completed_event_id: int, attrs: FailWorkflowExecutionCommandAttributes) -> None:
    decision = retry_decision(m, attrs.failure)
    retrying = decision is not None and decision.retry
    parked = parks_run(m, decision)
    cron_next = not retrying and bool(cron_schedule(m.state))
    new_run_id = m.ids.run_id() if retrying or cron_next or parked else ""
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
        new_run_id=new_run_id,
    )
    if new_run_id:
        if cron_next:
            m.continued = cron_run(m, new_run_id=new_run_id, result=None, failure=attrs.failure)
        elif parked:
            m.continued = park_run(m, new_run_id=new_run_id, failure=attrs.failure)
        else:
            assert decision is not None
            m.continued = retry_run(m, new_run_id=new_run_id, failure=attrs.failure, delay=decision.delay)


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
