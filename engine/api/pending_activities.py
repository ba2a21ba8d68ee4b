"""A run's pending activities as DescribeWorkflowExecution shows them (temporal.api.workflow.v1.PendingActivityInfo)."""

from __future__ import annotations

from datetime import datetime

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo

from engine.api.convert import ts
from engine.history import activity, activity_control
from engine.history.state import ActivityInfo

_State = PendingActivityState


def pending_activity(a: ActivityInfo, now: datetime) -> PendingActivityInfo:
    """One pending activity: its state (paused ones as PAUSED or PAUSE_REQUESTED), attempt and options."""
    scheduled = activity.scheduled_attributes(a)
    options = activity_control.current_options(a)
    if a.cancel_requested:
        state = _State.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED
    elif a.started_time is not None:
        state = (
            _State.PENDING_ACTIVITY_STATE_PAUSE_REQUESTED
            if a.paused
            else _State.PENDING_ACTIVITY_STATE_STARTED
        )
    else:
        state = _State.PENDING_ACTIVITY_STATE_PAUSED if a.paused else _State.PENDING_ACTIVITY_STATE_SCHEDULED
    item = PendingActivityInfo(
        activity_id=a.activity_id,
        activity_type=scheduled.activity_type,
        state=state,
        last_heartbeat_time=ts(a.last_heartbeat_time),
        last_started_time=ts(a.started_time),
        attempt=a.attempt,
        maximum_attempts=options.retry_policy.maximum_attempts,
        scheduled_time=ts(a.attempt_scheduled_time),
        expiration_time=ts(activity.expiration(a)),
        last_worker_identity=a.started_identity or a.last_worker_identity,
        last_attempt_complete_time=ts(a.last_attempt_complete_time),
        paused=a.paused,
        priority=options.priority,
    )
    if state == _State.PENDING_ACTIVITY_STATE_SCHEDULED and a.attempt_scheduled_time > now:
        # Waiting out a retry backoff (Temporal shows neither while paused or once dispatched).
        item.next_attempt_schedule_time.FromDatetime(a.attempt_scheduled_time)
        if a.last_attempt_complete_time is not None:
            item.current_retry_interval.FromTimedelta(a.attempt_scheduled_time - a.last_attempt_complete_time)
    if a.paused:
        item.pause_info.manual.identity = a.pause_identity
        item.pause_info.manual.reason = a.pause_reason
        if a.pause_time is not None:
            item.pause_info.pause_time.FromDatetime(a.pause_time)
    options.task_queue.normal_name = options.task_queue.name
    item.activity_options.CopyFrom(options)
    if a.heartbeat_details:
        item.heartbeat_details.ParseFromString(a.heartbeat_details)
    if a.last_failure:
        item.last_failure.ParseFromString(a.last_failure)
    return item
