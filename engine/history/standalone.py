"""Standalone activities (StartActivityExecution): one activity hosted by a run of its own, without a workflow.

The host run's state carries `standalone` (engine.history.state.StandaloneInfo) and one activity, whose
attempts, retries, timeouts and heartbeats follow the activity rules (engine/history/activity.py); its
outcome closes the run (engine/history/standalone_outcome.py). These are the rules a client drives:
start, request cancellation, terminate, and the view describe and list show.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio.api.activity.v1 import ActivityExecutionInfo, ActivityExecutionOutcome
from temporalio.api.command.v1 import ScheduleActivityTaskCommandAttributes
from temporalio.api.common.v1 import Payloads, SearchAttributes, WorkflowType
from temporalio.api.enums.v1 import (
    ActivityExecutionStatus,
    PendingActivityState,
    TaskQueueKind,
    WorkflowExecutionStatus,
)
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import (
    ActivityTaskCancelRequestedEventAttributes,
    WorkflowExecutionStartedEventAttributes,
)
from temporalio.api.sdk.v1 import UserMetadata
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartActivityExecutionRequest

from engine.errors import FailedPrecondition, InvalidArgument
from engine.history import activity, standalone_outcome
from engine.history.errors import CommandFailure
from engine.history.events import duration, new_event, seconds, string_payloads
from engine.history.mutation import Mutation
from engine.history.sources import IdSource
from engine.history.state import ActivityInfo, MutableState, StandaloneInfo
from visibility.divisions import activity_host_id

_W = WorkflowExecutionStatus
_A = ActivityExecutionStatus
STATUS: dict[int, ActivityExecutionStatus.ValueType] = {
    _W.WORKFLOW_EXECUTION_STATUS_RUNNING: _A.ACTIVITY_EXECUTION_STATUS_RUNNING,
    _W.WORKFLOW_EXECUTION_STATUS_COMPLETED: _A.ACTIVITY_EXECUTION_STATUS_COMPLETED,
    _W.WORKFLOW_EXECUTION_STATUS_FAILED: _A.ACTIVITY_EXECUTION_STATUS_FAILED,
    _W.WORKFLOW_EXECUTION_STATUS_CANCELED: _A.ACTIVITY_EXECUTION_STATUS_CANCELED,
    _W.WORKFLOW_EXECUTION_STATUS_TERMINATED: _A.ACTIVITY_EXECUTION_STATUS_TERMINATED,
    _W.WORKFLOW_EXECUTION_STATUS_TIMED_OUT: _A.ACTIVITY_EXECUTION_STATUS_TIMED_OUT,
}
"""A host run's status as the activity's (the run's status values are the workflow enum's)."""
_CLOSED_NAMES: dict[int, str] = {
    _W.WORKFLOW_EXECUTION_STATUS_COMPLETED: "Completed",
    _W.WORKFLOW_EXECUTION_STATUS_FAILED: "Failed",
    _W.WORKFLOW_EXECUTION_STATUS_CANCELED: "Canceled",
    _W.WORKFLOW_EXECUTION_STATUS_TERMINATED: "Terminated",
    _W.WORKFLOW_EXECUTION_STATUS_TIMED_OUT: "TimedOut",
}
"""A closed activity's status as Temporal names it in its refusals."""


def start(
    *,
    namespace_id: str,
    namespace: str,
    run_id: str,
    request: StartActivityExecutionRequest,
    now: datetime,
    ids: IdSource,
) -> Mutation:
    """A new host run with its activity scheduled (its first task after the start delay, if any).

    Raises:
        InvalidArgument: a missing activity type or task queue, a negative or missing timeout, or a bad
            retry policy (the messages of the ScheduleActivityTask command's checks).
    """
    if not request.activity_type.name:
        raise InvalidArgument("activityType is not set")
    delay = seconds(request.start_delay) if request.HasField("start_delay") else 0.0
    if delay < 0:
        raise InvalidArgument("invalid StartDelay: negative duration")
    if seconds(request.schedule_to_close_timeout) <= 0 and seconds(request.start_to_close_timeout) <= 0:
        raise InvalidArgument(
            "a valid StartToCloseTimeout or ScheduleToCloseTimeout must be set on the activity. "
            f"ActivityId={request.activity_id} ActivityType={request.activity_type.name}"
        )
    host_id = activity_host_id(request.activity_id)
    state = MutableState(
        namespace_id=namespace_id,
        namespace=namespace,
        workflow_id=host_id,
        run_id=run_id,
        first_run_id=run_id,
        workflow_type=request.activity_type.name,
        task_queue=request.task_queue.name,
        start_time=now,
        execution_time=now + timedelta(seconds=delay),
        workflow_task_timeout=0.0,
        start_request_id=request.request_id,
        search_attributes=request.search_attributes.SerializeToString()
        if request.HasField("search_attributes")
        else b"",
        user_metadata=request.user_metadata.SerializeToString() if request.HasField("user_metadata") else b"",
        standalone=StandaloneInfo(activity_id=request.activity_id, scheduled_event_id=0, start_delay=delay),
    )
    m = Mutation(state, now, ids)
    m.add(
        new_event(
            WorkflowExecutionStartedEventAttributes(
                workflow_type=WorkflowType(name=request.activity_type.name),
                task_queue=TaskQueue(name=request.task_queue.name, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
                input=request.input if request.HasField("input") else None,
                identity=request.identity,
                original_execution_run_id=run_id,
                first_execution_run_id=run_id,
                attempt=1,
                search_attributes=request.search_attributes
                if request.HasField("search_attributes")
                else None,
                workflow_id=host_id,
            )
        )
    )
    attrs = ScheduleActivityTaskCommandAttributes(
        activity_id=request.activity_id,
        activity_type=request.activity_type,
        task_queue=request.task_queue,
        header=request.header if request.HasField("header") else None,
        input=request.input if request.HasField("input") else None,
        schedule_to_close_timeout=request.schedule_to_close_timeout,
        schedule_to_start_timeout=request.schedule_to_start_timeout,
        start_to_close_timeout=request.start_to_close_timeout,
        heartbeat_timeout=request.heartbeat_timeout,
        retry_policy=request.retry_policy if request.HasField("retry_policy") else None,
        priority=request.priority if request.HasField("priority") else None,
        request_eager_execution=True,  # its task is queued below, after the start delay
    )
    try:
        sid = activity.schedule(m, completed_event_id=0, attrs=attrs)
    except CommandFailure as e:
        raise InvalidArgument(e.message) from None
    state.standalone.scheduled_event_id = sid  # type: ignore[union-attr]  # set above
    info = state.activities[sid]
    m.timers = [t for t in m.timers if t.event_id != sid]  # armed again from the delayed first attempt
    if delay > 0:
        # Temporal counts the schedule-to-close timeout from the first dispatch, after the delay; describe
        # keeps the request's time as the schedule time (the run's start time).
        info.scheduled_time = info.attempt_scheduled_time = now + timedelta(seconds=delay)
        info.task_visible_at = info.attempt_scheduled_time
    activity.rearm(m, info, delay=delay)
    return m


def hosted(state: MutableState) -> StandaloneInfo:
    if state.standalone is None:
        raise InvalidArgument("not a standalone activity")
    return state.standalone


def request_cancel(m: Mutation, *, reason: str, identity: str, request_id: str) -> None:
    """RequestCancelActivityExecution: an attempt running is asked to stop (its heartbeats say so, and
    its worker confirms); an activity no worker runs now is canceled at once, with the reason as details.

    Raises:
        FailedPrecondition: the activity is closed, or cancellation was already requested by another request.
    """
    info_of = hosted(m.state)
    if request_id and request_id == info_of.cancel_request_id:
        return  # a retry of the same request, perhaps after the activity was canceled
    if not m.state.running:
        raise FailedPrecondition(f"activity is in terminal state {_CLOSED_NAMES.get(m.state.status, '')}")
    info = m.state.activities[info_of.scheduled_event_id]
    if info.cancel_requested:
        raise FailedPrecondition(
            f"cancellation already requested with request ID {info_of.cancel_request_id}"
        )
    info_of.cancel_request_id = request_id
    info_of.canceled_reason = reason
    info_of.cancel_identity = identity
    event = m.add(
        new_event(ActivityTaskCancelRequestedEventAttributes(scheduled_event_id=info.scheduled_event_id))
    )
    info.cancel_requested = True
    info.cancel_requested_event_id = event.event_id
    if info.started_time is None:
        activity.cancel_scheduled(m, info, details=string_payloads(reason), identity=identity)


def terminate(m: Mutation, *, reason: str, identity: str, request_id: str) -> None:
    """TerminateActivityExecution: the activity closes TERMINATED whatever its attempt is doing.

    Raises:
        FailedPrecondition: the activity is closed (a retry of the terminating request is a no-op).
    """
    info_of = hosted(m.state)
    if not m.state.running:
        if m.state.status != _W.WORKFLOW_EXECUTION_STATUS_TERMINATED:
            raise FailedPrecondition(f"activity is in terminal state {_CLOSED_NAMES.get(m.state.status, '')}")
        if request_id != info_of.terminate_request_id:
            raise FailedPrecondition(f"already terminated with request ID {info_of.terminate_request_id}")
        return
    info_of.terminate_request_id = request_id
    standalone_outcome.terminated(m, info_of, reason=reason, identity=identity)


def current(state: MutableState) -> ActivityInfo | None:
    """The hosted activity: pending while the run is open, as it closed afterwards."""
    info_of = hosted(state)
    return state.activities.get(info_of.scheduled_event_id) or info_of.final


def outcome(state: MutableState) -> ActivityExecutionOutcome | None:
    info_of = hosted(state)
    return ActivityExecutionOutcome.FromString(info_of.outcome) if info_of.outcome else None


def run_state(state: MutableState, info: ActivityInfo | None) -> PendingActivityState.ValueType:
    if not state.running or info is None:
        return PendingActivityState.PENDING_ACTIVITY_STATE_UNSPECIFIED
    if info.cancel_requested:
        return PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED
    if info.paused:
        return PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED
    if info.started_time is not None:
        return PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
    return PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED


def status(state: MutableState) -> ActivityExecutionStatus.ValueType:
    info = state.activities.get(hosted(state).scheduled_event_id)
    if state.running and info is not None and info.paused:
        return ActivityExecutionStatus.ACTIVITY_EXECUTION_STATUS_PAUSED
    return STATUS.get(state.status, ActivityExecutionStatus.ACTIVITY_EXECUTION_STATUS_UNSPECIFIED)


def describe(
    state: MutableState, *, include_heartbeat_details: bool, include_last_failure: bool
) -> ActivityExecutionInfo:
    """What DescribeActivityExecution shows of the activity (Temporal's ActivityExecutionInfo)."""
    info_of = hosted(state)
    info = current(state)
    view = ActivityExecutionInfo(
        activity_id=info_of.activity_id,
        run_id=state.run_id,
        status=status(state),
        run_state=run_state(state, info),
        task_queue=state.task_queue,
        state_transition_count=state.state_transitions,
        canceled_reason=info_of.canceled_reason,
    )
    view.activity_type.name = state.workflow_type
    view.schedule_time.FromDatetime(state.start_time)
    view.execution_time.FromDatetime(state.execution_time)
    if info_of.start_delay:
        view.start_delay.CopyFrom(duration(info_of.start_delay))
    if state.close_time is not None:
        view.close_time.FromDatetime(state.close_time)
        view.execution_duration.FromTimedelta(state.close_time - state.start_time)
    if state.search_attributes:
        view.search_attributes.CopyFrom(SearchAttributes.FromString(state.search_attributes))
    if state.user_metadata:
        view.user_metadata.CopyFrom(UserMetadata.FromString(state.user_metadata))
    if info is None:
        return view
    scheduled = activity.scheduled_attributes(info)
    # The timeouts in force (an operator may have updated them), normalised as at the start.
    view.schedule_to_close_timeout.CopyFrom(duration(info.schedule_to_close))
    view.schedule_to_start_timeout.CopyFrom(duration(info.schedule_to_start))
    view.start_to_close_timeout.CopyFrom(duration(info.start_to_close))
    view.heartbeat_timeout.CopyFrom(duration(info.heartbeat))
    view.retry_policy.CopyFrom(activity.retry_policy(info))
    if scheduled.HasField("priority"):
        view.priority.CopyFrom(scheduled.priority)
    if scheduled.HasField("header"):
        view.header.CopyFrom(scheduled.header)
    view.attempt = info.attempt
    view.last_worker_identity = info.started_identity or info.last_worker_identity
    expiration = activity.expiration(info)
    if expiration is not None:
        view.expiration_time.FromDatetime(expiration)
    if info.started_time is not None:
        view.last_started_time.FromDatetime(info.started_time)
    if info.last_heartbeat_time is not None:
        view.last_heartbeat_time.FromDatetime(info.last_heartbeat_time)
    if include_heartbeat_details and info.heartbeat_details:
        view.heartbeat_details.CopyFrom(Payloads.FromString(info.heartbeat_details))
    if include_last_failure and info.last_failure:
        view.last_failure.CopyFrom(Failure.FromString(info.last_failure))
    if info.last_attempt_complete_time is not None:
        view.last_attempt_complete_time.FromDatetime(info.last_attempt_complete_time)
    if state.running and info.started_time is None and info.attempt > 1:
        # Waiting out a retry's backoff: when the next attempt is dispatched, and after how long.
        view.next_attempt_schedule_time.FromDatetime(info.attempt_scheduled_time)
        if info.last_attempt_complete_time is not None:
            view.current_retry_interval.FromTimedelta(
                info.attempt_scheduled_time - info.last_attempt_complete_time
            )
    return view
