"""The RequestCancelActivityTask command: a started activity is asked to stop (its worker learns of it from
its heartbeats); one that no worker runs is cancelled at once."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import (
    ActivityTaskCanceledEventAttributes,
    ActivityTaskCancelRequestedEventAttributes,
)

from engine.history import parking
from engine.history.errors import CommandFailure
from engine.history.events import new_event, string_payloads
from engine.history.machines import ActivityState, transition
from engine.history.mutation import Mutation, TimerKind

NOT_STARTED_CANCEL_DETAILS = "ACTIVITY_ID_NOT_STARTED"
_CLOSE_TYPES = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "activity_task_canceled_event_attributes",
}


def request_cancel(m: Mutation, *, completed_event_id: int, scheduled_event_id: int, identity: str) -> bool:
    """The RequestCancelActivityTask command. Returns True when the activity was cancelled at once."""
    info = m.state.activities.get(scheduled_event_id)
    if info is None and any(
        e.event_type in _CLOSE_TYPES
        and getattr(e, _CLOSE_TYPES[e.event_type]).scheduled_event_id == scheduled_event_id
        for e in m.buffered_events()
    ):
        # Its result arrived while this task ran: record the request; the buffered result follows it.
        m.add(
            new_event(
                ActivityTaskCancelRequestedEventAttributes(
                    scheduled_event_id=scheduled_event_id, workflow_task_completed_event_id=completed_event_id
                )
            )
        )
        return False
    if info is not None and info.cancel_requested:
        raise CommandFailure(
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_REQUEST_CANCEL_ACTIVITY_ATTRIBUTES,
            f"activity with scheduled event id {scheduled_event_id} is already cancel-requested",
        )
    if info is None:
        raise CommandFailure(
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_REQUEST_CANCEL_ACTIVITY_ATTRIBUTES,
            f"invalid history builder state for action: add-activitytask-cancel-requested-event, "
            f"scheduled event id {scheduled_event_id} is not a pending activity",
        )
    event = m.add(
        new_event(
            ActivityTaskCancelRequestedEventAttributes(
                scheduled_event_id=scheduled_event_id, workflow_task_completed_event_id=completed_event_id
            )
        )
    )
    info.cancel_requested = True
    info.cancel_requested_event_id = event.event_id
    if info.state is ActivityState.STARTED:
        return False
    # Not running anywhere: it is cancelled right away and the workflow gets a task to see it.
    m.add(
        new_event(
            ActivityTaskCanceledEventAttributes(
                details=string_payloads(NOT_STARTED_CANCEL_DETAILS),
                latest_cancel_requested_event_id=event.event_id,
                scheduled_event_id=scheduled_event_id,
                started_event_id=0,
                identity=identity,
            )
        )
    )
    with transition(info, {ActivityState.SCHEDULED}, ActivityState.CLOSED):
        del m.state.activities[scheduled_event_id]
    m.drop_timers(TimerKind.ACTIVITY_TIMEOUT, scheduled_event_id)
    if info.paused:  # its type leaves TemporalPauseInfo (and PerduraParked, if it was parked)
        parking.reindex(m)
    return True
