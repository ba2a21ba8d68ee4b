"""How a standalone activity's outcome closes the run that hosts it (imported by the activity rules)."""

from __future__ import annotations

from temporalio.api.activity.v1 import ActivityExecutionOutcome
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType, WorkflowExecutionStatus
from temporalio.api.failure.v1 import CanceledFailureInfo, Failure, TerminatedFailureInfo
from temporalio.api.history.v1 import (
    HistoryEvent,
    WorkflowExecutionCanceledEventAttributes,
    WorkflowExecutionCompletedEventAttributes,
    WorkflowExecutionFailedEventAttributes,
    WorkflowExecutionTerminatedEventAttributes,
    WorkflowExecutionTimedOutEventAttributes,
)

from engine.history.events import new_event
from engine.history.lifecycle.closing import close
from engine.history.mutation import Mutation
from engine.history.state import ActivityInfo, StandaloneInfo

_S = WorkflowExecutionStatus
CANCELED_MESSAGE = "Activity canceled"
_LAST_ATTEMPT_FAILED = {_S.WORKFLOW_EXECUTION_STATUS_FAILED, _S.WORKFLOW_EXECUTION_STATUS_TIMED_OUT}


def canceled_failure(details: Payloads | None, identity: str) -> Failure:
    """The failure a canceled standalone activity's outcome carries (Temporal's, for the SDK's CancelledError)."""
    return Failure(
        message=CANCELED_MESSAGE,
        canceled_failure_info=CanceledFailureInfo(
            details=details if details is not None and details.payloads else None, identity=identity
        ),
    )


def _finish(
    m: Mutation, info: ActivityInfo, status: int, outcome: ActivityExecutionOutcome, close_event: HistoryEvent
) -> None:
    hosted = m.state.standalone
    assert hosted is not None
    if outcome.HasField("failure") and status in _LAST_ATTEMPT_FAILED:
        # The last attempt's own failure (a timeout without what it wraps), as Temporal's describe shows it.
        last = Failure()
        last.CopyFrom(outcome.failure)
        last.ClearField("cause")
        info.last_failure = last.SerializeToString()
    hosted.final = info
    hosted.outcome = outcome.SerializeToString()
    close(m, status, close_event)


def closed(m: Mutation, info: ActivityInfo, event: HistoryEvent | None) -> None:
    """The hosted activity reached its outcome (`event`, its close event): the run closes with it."""
    hosted = m.state.standalone
    assert hosted is not None
    assert event is not None
    t = event.event_type
    if t == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        result = event.activity_task_completed_event_attributes.result
        _finish(
            m,
            info,
            _S.WORKFLOW_EXECUTION_STATUS_COMPLETED,
            ActivityExecutionOutcome(result=result),
            new_event(WorkflowExecutionCompletedEventAttributes(result=result)),
        )
    elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
        attrs = event.activity_task_failed_event_attributes
        _finish(
            m,
            info,
            _S.WORKFLOW_EXECUTION_STATUS_FAILED,
            ActivityExecutionOutcome(failure=attrs.failure),
            new_event(
                WorkflowExecutionFailedEventAttributes(failure=attrs.failure, retry_state=attrs.retry_state)
            ),
        )
    elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
        attrs_t = event.activity_task_timed_out_event_attributes
        _finish(
            m,
            info,
            _S.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
            ActivityExecutionOutcome(failure=attrs_t.failure),
            new_event(WorkflowExecutionTimedOutEventAttributes(retry_state=attrs_t.retry_state)),
        )
    else:
        assert t == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED
        details = event.activity_task_canceled_event_attributes.details
        _finish(
            m,
            info,
            _S.WORKFLOW_EXECUTION_STATUS_CANCELED,
            ActivityExecutionOutcome(failure=canceled_failure(details, hosted.cancel_identity)),
            new_event(
                WorkflowExecutionCanceledEventAttributes(details=details if details.payloads else None)
            ),
        )


def terminated(m: Mutation, hosted: StandaloneInfo, *, reason: str, identity: str) -> None:
    """Terminate the hosted activity: whatever attempt runs is abandoned, and the run closes TERMINATED."""
    info = m.state.activities.get(hosted.scheduled_event_id)
    failure = Failure(message=reason, terminated_failure_info=TerminatedFailureInfo(identity=identity))
    if info is not None:
        hosted.final = info
    hosted.outcome = ActivityExecutionOutcome(failure=failure).SerializeToString()
    close(
        m,
        _S.WORKFLOW_EXECUTION_STATUS_TERMINATED,
        new_event(WorkflowExecutionTerminatedEventAttributes(reason=reason, identity=identity)),
    )
