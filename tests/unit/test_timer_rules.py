"""User timer rules: StartTimer and CancelTimer commands, and timers firing."""

from __future__ import annotations

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import WorkflowTaskFailedCause

from engine.history import timer
from engine.history.errors import StaleTask
from engine.history.events import seconds
from engine.history.mutation import TimerKind
from tests.unit.history_harness import (
    WORKER,
    Run,
    at,
    attrs_of,
    cancel_timer,
    complete_workflow,
    start_timer,
    types,
)

Cause = WorkflowTaskFailedCause


def timer_run(*commands) -> Run:
    run = Run()
    failure = run.run_wft(1, *commands)
    assert failure is None, failure
    return run


def test_start_timer_writes_timer_started_and_a_timer_row():
    run = timer_run(start_timer("1", 2))

    assert types(run.new_events) == ["WORKFLOW_TASK_COMPLETED", "TIMER_STARTED"]
    started = attrs_of(run.new_events[1])
    assert (started.timer_id, seconds(started.start_to_fire_timeout)) == ("1", 2)
    assert started.workflow_task_completed_event_id == 4
    timers = [t for t in run.new_timers if t.kind == TimerKind.USER_TIMER]
    assert [(t.fire_at, t.event_id) for t in timers] == [(at(3), 5)]
    assert run.state.timers["1"].fire_at == at(3)


def test_timer_fires_then_a_workflow_task_sees_it():
    """FINDINGS s08_timer_2s."""
    run = timer_run(start_timer("1", 2))
    run.fire_timer(3, "1")

    assert types(run.new_events) == ["TIMER_FIRED", "WORKFLOW_TASK_SCHEDULED"]
    fired = attrs_of(run.new_events[0])
    assert (fired.timer_id, fired.started_event_id) == ("1", 5)
    assert run.state.timers == {}
    run.run_wft(4, complete_workflow())
    assert run.types()[4:] == [
        "TIMER_STARTED",
        "TIMER_FIRED",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED",
        "WORKFLOW_EXECUTION_COMPLETED",
    ]


def test_cancel_timer_in_a_later_task_then_complete():
    """FINDINGS s08_timer_cancel: 0.5 s and 60 s timers; the short one fires, the long one is cancelled."""
    run = timer_run(start_timer("1", 0.5), start_timer("2", 60))
    run.fire_timer(2, "1")
    run.run_wft(3, cancel_timer("2"), complete_workflow())

    assert types(run.new_events) == [
        "WORKFLOW_TASK_COMPLETED",
        "TIMER_CANCELED",
        "WORKFLOW_EXECUTION_COMPLETED",
    ]
    canceled = attrs_of(run.new_events[1])
    assert (canceled.timer_id, canceled.started_event_id) == ("2", 6)
    assert canceled.workflow_task_completed_event_id == run.new_events[0].event_id
    assert canceled.identity == WORKER
    assert run.state.timers == {}


def test_cancelled_timer_firing_later_is_stale():
    run = timer_run(start_timer("1", 60))
    started_id = run.state.timers["1"].started_event_id
    run.signal(2, "s")
    run.run_wft(3, cancel_timer("1"))

    with pytest.raises(StaleTask):
        run.apply(61, timer.fire, started_event_id=started_id)


def test_timer_firing_twice_or_after_close_is_stale():
    run = timer_run(start_timer("1", 2), start_timer("2", 5))
    first_id = run.state.timers["1"].started_event_id
    second_id = run.state.timers["2"].started_event_id
    run.fire_timer(3, "1")
    with pytest.raises(StaleTask):
        run.apply(3.5, timer.fire, started_event_id=first_id)
    run.run_wft(4, complete_workflow())
    with pytest.raises(StaleTask):
        run.apply(6, timer.fire, started_event_id=second_id)


def test_timer_fired_while_a_task_is_started_is_buffered():
    run = timer_run(start_timer("1", 1))
    run.signal(1.5, "s")
    run.start_wft(1.6)
    run.fire_timer(2, "1")
    assert run.new_events == []
    assert run.state.timers == {}

    run.complete_wft(3)

    assert types(run.new_events) == ["WORKFLOW_TASK_COMPLETED", "TIMER_FIRED", "WORKFLOW_TASK_SCHEDULED"]
    assert run.new_events[1].event_time.ToDatetime(tzinfo=at(0).tzinfo) == at(2)


def _negative(attrs) -> None:
    attrs.start_to_fire_timeout.CopyFrom(Duration(seconds=-1))


BAD_TIMERS = [
    (
        "duplicate id in one task",
        [start_timer("1", 5), start_timer("1", 9)],
        Cause.WORKFLOW_TASK_FAILED_CAUSE_START_TIMER_DUPLICATE_ID,
    ),
    ("empty id", [start_timer("", 5)], Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_TIMER_ATTRIBUTES),
    (
        "id too long",
        [start_timer("x" * 1001, 5)],
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_TIMER_ATTRIBUTES,
    ),
    ("negative duration", "negative", Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_TIMER_ATTRIBUTES),
    (
        "cancel unknown timer",
        [cancel_timer("nope")],
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_CANCEL_TIMER_ATTRIBUTES,
    ),
]


@pytest.mark.parametrize(("commands", "cause"), [b[1:] for b in BAD_TIMERS], ids=[b[0] for b in BAD_TIMERS])
def test_bad_timer_command_fails_the_workflow_task(commands, cause):
    if commands == "negative":
        command = start_timer("1", 5)
        _negative(command.start_timer_command_attributes)
        commands = [command]
    run = Run()
    run.start_wft(1)

    failure = run.complete_wft(2, *commands)

    assert failure is not None
    assert failure.cause == cause
    assert run.types()[3:] == ["WORKFLOW_TASK_FAILED"]
    assert attrs_of(run.event(4)).cause == cause
    assert run.state.timers == {}


def test_timer_id_of_a_pending_timer_cannot_be_reused_but_a_fired_one_can():
    run = timer_run(start_timer("1", 2))
    run.signal(1.5, "s")
    failure = run.run_wft(1.6, start_timer("1", 2))
    assert failure is not None
    assert failure.cause == Cause.WORKFLOW_TASK_FAILED_CAUSE_START_TIMER_DUPLICATE_ID

    run.fire_timer(3, "1")
    assert run.run_wft(4, start_timer("1", 2)) is None
    assert run.types()[-1] == "TIMER_STARTED"


def test_cancel_of_a_timer_whose_fire_is_buffered_replaces_the_fire():
    run = timer_run(start_timer("1", 1))
    run.signal(1.5, "s")
    run.start_wft(1.6)
    run.fire_timer(2, "1")  # buffered

    failure = run.complete_wft(3, cancel_timer("1"))

    assert failure is None
    assert types(run.new_events) == ["WORKFLOW_TASK_COMPLETED", "TIMER_CANCELED"]


def test_zero_duration_timer_is_accepted():
    run = Run()
    run.start_wft(1)
    assert run.complete_wft(2, start_timer("0", 0)) is None
    assert types(run.new_events) == ["WORKFLOW_TASK_COMPLETED", "TIMER_STARTED"]


@pytest.mark.parametrize(("duration", "row_delay"), [(0.2, 1.0), (0.5, 1.0), (1.0, 1.0), (2.5, 2.5)])
def test_a_timer_row_fires_no_sooner_than_a_second_after_it_was_set(duration, row_delay):
    # Temporal's timer queue shift: shorter timers fire about a second after they started.
    run = timer_run(start_timer("1", duration))
    [row] = run.new_timers
    assert (row.kind, row.fire_at) == (TimerKind.USER_TIMER, at(1 + row_delay))
    assert run.state.timers["1"].fire_at == at(1 + duration)  # when it was due, for ordering


def test_short_timers_set_together_fire_together_in_the_order_they_were_due():
    run = timer_run(start_timer("long", 0.5), start_timer("short", 0.2))
    run.fire_timer(2, "long")  # whichever row fires first fires both
    assert types(run.new_events) == ["TIMER_FIRED", "TIMER_FIRED", "WORKFLOW_TASK_SCHEDULED"]
    assert [attrs_of(e).timer_id for e in run.new_events[:2]] == ["short", "long"]
    assert run.state.timers == {}


def test_a_timer_not_yet_due_is_left_for_its_own_row():
    run = timer_run(start_timer("1", 2), start_timer("2", 5))
    run.fire_timer(3, "1")
    assert types(run.new_events) == ["TIMER_FIRED", "WORKFLOW_TASK_SCHEDULED"]
    assert list(run.state.timers) == ["2"]
