"""User timer transitions: StartTimer and CancelTimer commands, and a timer firing."""

from __future__ import annotations

from datetime import timedelta

from temporalio.api.command.v1 import CancelTimerCommandAttributes, StartTimerCommandAttributes
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import (
    TimerCanceledEventAttributes,
    TimerFiredEventAttributes,
    TimerStartedEventAttributes,
)

from engine.history import workflow_task
from engine.history.errors import CommandFailure, StaleTask
from engine.history.events import new_event, seconds
from engine.history.machines import TimerState, transition
from engine.history.mutation import ACTIVITY_TIMEOUT_MIN_DELAY, Mutation, TimerKind
from engine.history.state import TimerInfo

_BAD_START = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_TIMER_ATTRIBUTES
MIN_FIRE_DELAY = ACTIVITY_TIMEOUT_MIN_DELAY
"""Temporal's timer queue fires a new task no sooner than about a second after it is created
(TimerProcessorMaxTimeShift): a shorter timer fires about a second after it started, and two short timers
started by one workflow task fire together."""


def start(m: Mutation, *, completed_event_id: int, attrs: StartTimerCommandAttributes) -> None:
    if not attrs.timer_id:
        raise CommandFailure(_BAD_START, "TimerId is not set on StartTimerCommand.")
    if len(attrs.timer_id) > 1000:
        raise CommandFailure(_BAD_START, "TimerId exceeds length limit.")
    delay = seconds(attrs.start_to_fire_timeout)
    if delay < 0:
        raise CommandFailure(
            _BAD_START, f"An invalid StartToFireTimeout is set on StartTimerCommand: {delay}s."
        )
    if attrs.timer_id in m.state.timers:
        raise CommandFailure(
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_START_TIMER_DUPLICATE_ID,
            f"Timer ID {attrs.timer_id} is already in use.",
        )
    event = m.add(
        new_event(
            TimerStartedEventAttributes(
                timer_id=attrs.timer_id,
                start_to_fire_timeout=attrs.start_to_fire_timeout,
                workflow_task_completed_event_id=completed_event_id,
            )
        )
    )
    fire_at = m.now + timedelta(seconds=delay)
    m.state.timers[attrs.timer_id] = TimerInfo(
        timer_id=attrs.timer_id, started_event_id=event.event_id, fire_at=fire_at
    )
    m.timer(TimerKind.USER_TIMER, max(fire_at, m.now + MIN_FIRE_DELAY), event_id=event.event_id)


def cancel(
    m: Mutation, *, completed_event_id: int, attrs: CancelTimerCommandAttributes, identity: str
) -> None:
    info = m.state.timers.get(attrs.timer_id)
    if info is None:
        # It fired while this task ran: the cancel wins and the buffered fire is dropped, as in Temporal.
        fired = m.take_buffered(
            lambda e: (
                e.event_type == EventType.EVENT_TYPE_TIMER_FIRED
                and e.timer_fired_event_attributes.timer_id == attrs.timer_id
            )
        )
        if fired is not None:
            m.add(
                new_event(
                    TimerCanceledEventAttributes(
                        timer_id=attrs.timer_id,
                        started_event_id=fired.timer_fired_event_attributes.started_event_id,
                        workflow_task_completed_event_id=completed_event_id,
                        identity=identity,
                    )
                )
            )
            return
        raise CommandFailure(
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_CANCEL_TIMER_ATTRIBUTES,
            f"invalid history builder state for action: add-timer-canceled-event, timer {attrs.timer_id!r} is not pending",
        )
    m.add(
        new_event(
            TimerCanceledEventAttributes(
                timer_id=attrs.timer_id,
                started_event_id=info.started_event_id,
                workflow_task_completed_event_id=completed_event_id,
                identity=identity,
            )
        )
    )
    with transition(info, {TimerState.STARTED}, TimerState.CLOSED):
        del m.state.timers[attrs.timer_id]
    m.drop_timers(TimerKind.USER_TIMER, info.started_event_id)


def fire(m: Mutation, *, started_event_id: int) -> None:
    """The timer row came due: write TimerFired for it and for every other timer of the run due by now
    (in order of when each was due, as Temporal fires a run's expired timers in one go), then schedule a
    task. A row may fire later than its timer was due (MIN_FIRE_DELAY)."""
    if not m.state.running:
        raise StaleTask("run closed")
    info = next((t for t in m.state.timers.values() if t.started_event_id == started_event_id), None)
    if info is None:
        raise StaleTask("timer no longer pending")
    due = sorted(
        (t for t in m.state.timers.values() if t is info or t.fire_at <= m.now),
        key=lambda t: (t.fire_at, t.started_event_id),
    )
    for timer in due:  # the others' rows find them gone and are stale
        m.add_external(
            new_event(
                TimerFiredEventAttributes(timer_id=timer.timer_id, started_event_id=timer.started_event_id)
            )
        )
        with transition(timer, {TimerState.STARTED}, TimerState.CLOSED):
            del m.state.timers[timer.timer_id]
    workflow_task.schedule(m)
