"""Rebuild: the mutable state a run had after a prefix of its history, derived from the events alone.

It gives the state the live transitions built (tests/unit/test_rebuild_property.py checks that), except
where a rebuilt run starts afresh: countdowns (activity scheduling, the run timeout) start at `now`.
Reset builds its new run from it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from engine.history import commands, updates, versioning, versioning_attributes
from engine.history.errors import ResetRejected
from engine.history.events import attributes, seconds
from engine.history.lifecycle.signals import MAX_SIGNAL_REQUEST_IDS
from engine.history.state import (
    ActivityInfo,
    ChildInfo,
    ExternalRequest,
    MutableState,
    ParentInfo,
    TimerInfo,
    UpdateInfo,
    WorkflowTaskInfo,
)

E = EventType
# Events that end something pending; attributes(event) names it (scheduled or initiated event id).
_ACTIVITY_CLOSES = {
    E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
    E.EVENT_TYPE_ACTIVITY_TASK_FAILED,
    E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
    E.EVENT_TYPE_ACTIVITY_TASK_CANCELED,
}
_CHILD_ENDS = {
    E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED,
}
_SIGNAL_EXTERNAL_ENDS = {
    E.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED,
    E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED,
}
_CANCEL_EXTERNAL_ENDS = {
    E.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED,
    E.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED,
}


def rebuild(
    events: list[HistoryEvent], *, namespace_id: str, namespace: str, run_id: str, now: datetime
) -> MutableState:
    """The mutable state a run had after `events` (a prefix of its history, starting with its start event).

    Times that start countdowns (activity scheduling, the run timeout) are taken as `now`: the rebuilt
    run starts now. Timers keep their original fire times, as Temporal's do.
    """
    if not events or events[0].event_type != E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        raise ResetRejected("the history to reset does not begin with WorkflowExecutionStarted")
    state = _started_state(events[0], namespace_id=namespace_id, namespace=namespace, run_id=run_id, now=now)
    for event in events[1:]:
        apply_event(state, event, now)
    state.next_event_id = events[-1].event_id + 1
    state.history_size = sum(e.ByteSize() for e in events)
    return state


def _started_state(
    event: HistoryEvent, *, namespace_id: str, namespace: str, run_id: str, now: datetime
) -> MutableState:
    attrs = event.workflow_execution_started_event_attributes
    execution_expiration = (
        attrs.workflow_execution_expiration_time.ToDatetime(tzinfo=now.tzinfo)
        if attrs.HasField("workflow_execution_expiration_time")
        else None
    )
    run_timeout = seconds(attrs.workflow_run_timeout)
    run_expiration = now + timedelta(seconds=run_timeout) if run_timeout else None
    if execution_expiration is not None and (run_expiration is None or run_expiration > execution_expiration):
        run_expiration = execution_expiration
    parent = None
    if attrs.HasField("parent_workflow_execution"):
        parent = ParentInfo(
            namespace=attrs.parent_workflow_namespace,
            namespace_id=attrs.parent_workflow_namespace_id,
            workflow_id=attrs.parent_workflow_execution.workflow_id,
            run_id=attrs.parent_workflow_execution.run_id,
            initiated_event_id=attrs.parent_initiated_event_id,
            root_workflow_id=attrs.root_workflow_execution.workflow_id,
            root_run_id=attrs.root_workflow_execution.run_id,
        )
    return MutableState(
        namespace_id=namespace_id,
        namespace=namespace,
        workflow_id=attrs.workflow_id,
        run_id=run_id,
        first_run_id=attrs.first_execution_run_id,
        workflow_type=attrs.workflow_type.name,
        task_queue=attrs.task_queue.name,
        start_time=now,
        execution_time=now,
        workflow_task_timeout=seconds(attrs.workflow_task_timeout),
        run_timeout=run_timeout,
        execution_timeout=seconds(attrs.workflow_execution_timeout),
        run_expiration=run_expiration,
        execution_expiration=execution_expiration,
        memo=attrs.memo.SerializeToString() if attrs.HasField("memo") else b"",
        search_attributes=attrs.search_attributes.SerializeToString()
        if attrs.HasField("search_attributes")
        else b"",
        attempt=attrs.attempt or 1,
        start_attrs=attrs.SerializeToString(),
        user_metadata=event.user_metadata.SerializeToString() if event.HasField("user_metadata") else b"",
        parent=parent,
    )


def apply_event(state: MutableState, event: HistoryEvent, now: datetime) -> None:  # noqa: C901 - one case per event type
    kind = event.event_type
    at = event.event_time.ToDatetime(tzinfo=now.tzinfo)
    if kind == E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
        scheduled = event.workflow_task_scheduled_event_attributes
        state.workflow_task = WorkflowTaskInfo(
            scheduled_event_id=event.event_id,
            attempt=scheduled.attempt or 1,
            task_queue=scheduled.task_queue.name,
            timeout=seconds(scheduled.start_to_close_timeout),
            scheduled_time=at,
        )
    elif kind == E.EVENT_TYPE_WORKFLOW_TASK_STARTED:
        started = event.workflow_task_started_event_attributes
        wft = state.workflow_task
        if wft is not None and wft.scheduled_event_id == started.scheduled_event_id:
            wft.started_event_id = event.event_id
            wft.started_time = at
            wft.request_id = started.request_id
            wft.identity = started.identity
    elif kind == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
        completed = event.workflow_task_completed_event_attributes
        state.last_completed_wft_started_event_id = completed.started_event_id
        state.workflow_task = None
        version = completed.deployment_version if completed.HasField("deployment_version") else None
        stamp = completed.worker_version if completed.HasField("worker_version") else None
        declared = versioning.Declared(
            completed.worker_deployment_name, version, completed.versioning_behavior, stamp
        )
        versioning.record(state, declared)
        versioning_attributes.index(state, stamp, version)
    elif kind in (E.EVENT_TYPE_WORKFLOW_TASK_FAILED, E.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT):
        state.workflow_task = None
    elif kind == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        activity = event.activity_task_scheduled_event_attributes
        state.activities[event.event_id] = ActivityInfo(
            scheduled_event_id=event.event_id,
            activity_id=activity.activity_id,
            activity_type=activity.activity_type.name,
            task_queue=activity.task_queue.name,
            scheduled=activity.SerializeToString(),
            scheduled_time=now,
            schedule_to_close=seconds(activity.schedule_to_close_timeout),
            schedule_to_start=seconds(activity.schedule_to_start_timeout),
            start_to_close=seconds(activity.start_to_close_timeout),
            heartbeat=seconds(activity.heartbeat_timeout),
            attempt_scheduled_time=now,
        )
    elif kind == E.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED:
        cancel = event.activity_task_cancel_requested_event_attributes
        info = state.activities.get(cancel.scheduled_event_id)
        if info is not None:
            info.cancel_requested = True
            info.cancel_requested_event_id = event.event_id
    elif kind in _ACTIVITY_CLOSES:
        state.activities.pop(attributes(event).scheduled_event_id, None)
    elif kind == E.EVENT_TYPE_TIMER_STARTED:
        timer = event.timer_started_event_attributes
        state.timers[timer.timer_id] = TimerInfo(
            timer_id=timer.timer_id,
            started_event_id=event.event_id,
            fire_at=at + timer.start_to_fire_timeout.ToTimedelta(),
        )
    elif kind == E.EVENT_TYPE_TIMER_FIRED:
        state.timers.pop(event.timer_fired_event_attributes.timer_id, None)
    elif kind == E.EVENT_TYPE_TIMER_CANCELED:
        state.timers.pop(event.timer_canceled_event_attributes.timer_id, None)
    elif kind == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
        initiated = event.start_child_workflow_execution_initiated_event_attributes
        state.children[event.event_id] = ChildInfo(
            initiated_event_id=event.event_id,
            workflow_id=initiated.workflow_id,
            workflow_type=initiated.workflow_type.name,
            parent_close_policy=initiated.parent_close_policy,
        )
    elif kind == E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
        child_started = event.child_workflow_execution_started_event_attributes
        child = state.children.get(child_started.initiated_event_id)
        if child is not None:
            child.run_id = child_started.workflow_execution.run_id
            child.started_event_id = event.event_id
    elif kind in _CHILD_ENDS:
        state.children.pop(attributes(event).initiated_event_id, None)
    elif kind == E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
        state.external_signals[event.event_id] = _external_request(event)
    elif kind in _SIGNAL_EXTERNAL_ENDS:
        state.external_signals.pop(attributes(event).initiated_event_id, None)
    elif kind == E.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
        state.external_cancels[event.event_id] = _external_request(event)
    elif kind in _CANCEL_EXTERNAL_ENDS:
        state.external_cancels.pop(attributes(event).initiated_event_id, None)
    elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        request_id = event.workflow_execution_signaled_event_attributes.request_id
        if request_id:
            state.signal_request_ids = [*state.signal_request_ids, request_id][-MAX_SIGNAL_REQUEST_IDS:]
    elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
        state.cancel_requested = True
    elif kind == E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
        state.search_attributes = commands.merged_search_attributes(
            state.search_attributes,
            event.upsert_workflow_search_attributes_event_attributes.search_attributes,
        )
    elif kind == E.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
        state.memo = commands.merged_memo(
            state.memo, event.workflow_properties_modified_event_attributes.upserted_memo
        )
    elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED:
        request = event.workflow_execution_update_admitted_event_attributes.request
        state.updates[request.meta.update_id] = UpdateInfo(
            update_id=request.meta.update_id,
            request=request.SerializeToString(),
            stage=updates.ADMITTED,
            admitted_event_id=event.event_id,
        )
    elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
        accepted = event.workflow_execution_update_accepted_event_attributes
        update = state.updates.get(accepted.protocol_instance_id)
        if update is None:
            update = state.updates[accepted.protocol_instance_id] = UpdateInfo(
                update_id=accepted.protocol_instance_id,
                request=accepted.accepted_request.SerializeToString(),
                stage=updates.ACCEPTED,
            )
        update.stage = updates.ACCEPTED
        update.accepted_event_id = event.event_id
    elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
        update_completed = event.workflow_execution_update_completed_event_attributes
        update = state.updates.get(update_completed.meta.update_id)
        if update is not None:
            update.stage = updates.COMPLETED
            update.outcome = update_completed.outcome.SerializeToString()
    # Markers, search attribute and memo-free events, and the rest change nothing a new run needs.


def _external_request(initiated: HistoryEvent) -> ExternalRequest:
    attrs = attributes(initiated)
    return ExternalRequest(
        initiated_event_id=initiated.event_id,
        workflow_id=attrs.workflow_execution.workflow_id,
        run_id=attrs.workflow_execution.run_id,
        control=attrs.control,
    )
