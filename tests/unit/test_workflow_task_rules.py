"""Workflow task rules: start, complete, fail, time out, transient attempts, buffering, unhandled commands."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import TimeoutType, WorkflowExecutionStatus, WorkflowTaskFailedCause

from engine.history import lifecycle, workflow_task
from engine.history.errors import StaleTask
from engine.history.events import seconds
from engine.history.mutation import TaskKind, TimerKind
from tests.unit.history_harness import (
    WORKER,
    Run,
    at,
    attrs_of,
    cancel_workflow,
    complete_workflow,
    fail_workflow,
    record_marker,
    schedule_activity,
    start_request,
    start_timer,
    types,
)

Cause = WorkflowTaskFailedCause


def event_time(event):
    return event.event_time.ToDatetime(tzinfo=at(0).tzinfo)


# --- start and complete --------------------------------------------------------------------------------


def test_start_writes_started_and_arms_the_start_to_close_timer():
    run = Run(start_request(task_timeout=7))

    wft = run.start_wft(0.5, identity="w-9", request_id="poll-xyz")

    assert types(run.new_events) == ["WORKFLOW_TASK_STARTED"]
    started = attrs_of(run.new_events[0])
    assert (started.scheduled_event_id, started.identity, started.request_id) == (2, "w-9", "poll-xyz")
    assert (wft.scheduled_event_id, wft.started_event_id, wft.attempt) == (2, 3, 1)
    assert wft.started_time == at(0.5)
    [timer] = run.new_timers
    assert (timer.kind, timer.fire_at, timer.event_id, timer.attempt) == (
        TimerKind.WORKFLOW_TASK_TIMEOUT,
        at(7.5),
        2,
        1,
    )
    assert run.new_tasks == []


def test_complete_without_commands_writes_completed_and_schedules_nothing():
    run = Run()
    run.start_wft(1)
    run.complete_wft(2)

    assert types(run.new_events) == ["WORKFLOW_TASK_COMPLETED"]
    completed = attrs_of(run.new_events[0])
    assert (completed.scheduled_event_id, completed.started_event_id, completed.identity) == (2, 3, WORKER)
    assert run.new_tasks == []
    assert run.state.workflow_task is None
    assert run.state.last_completed_wft_started_event_id == 3
    assert run.state.running


def test_command_events_follow_completed_in_command_order():
    run = Run()
    run.run_wft(
        1,
        schedule_activity("1", start_to_close=5),
        schedule_activity("2", start_to_close=5),
        start_timer("t", 3),
        record_marker("m"),
    )
    assert types(run.new_events) == [
        "WORKFLOW_TASK_COMPLETED",
        "ACTIVITY_TASK_SCHEDULED",
        "ACTIVITY_TASK_SCHEDULED",
        "TIMER_STARTED",
        "MARKER_RECORDED",
    ]
    assert {attrs_of(e).workflow_task_completed_event_id for e in run.new_events[1:]} == {4}


def test_force_create_new_workflow_task_schedules_one_right_after_completed():
    run = Run()
    run.start_wft(1)
    run.complete_wft(2, force_create_new_workflow_task=True)

    assert types(run.new_events) == ["WORKFLOW_TASK_COMPLETED", "WORKFLOW_TASK_SCHEDULED"]
    assert [(t.kind, t.scheduled_event_id, t.attempt) for t in run.new_tasks] == [(TaskKind.WORKFLOW, 5, 1)]


# --- failure and transient attempts --------------------------------------------------------------------


def test_worker_failure_writes_failed_then_a_transient_attempt_without_events():
    run = Run()
    run.start_wft(0.1)

    run.fail_wft(0.2)

    assert types(run.new_events) == ["WORKFLOW_TASK_FAILED"]
    failed = attrs_of(run.new_events[0])
    assert failed.cause == Cause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE
    assert failed.failure.message == "workflow code raised"
    assert (failed.scheduled_event_id, failed.started_event_id, failed.identity) == (2, 3, WORKER)
    wft = run.state.workflow_task
    assert (wft.attempt, wft.scheduled_event_id, wft.started_event_id) == (2, 5, 0)
    assert run.state.next_event_id == 5  # the transient task took no id
    [task] = run.new_tasks
    assert (task.kind, task.scheduled_event_id, task.attempt, task.visible_at) == (
        TaskKind.WORKFLOW,
        5,
        2,
        at(0.2),
    )

    # a later failure of the transient attempt writes nothing either
    run.start_wft(0.3)
    assert run.new_events == []
    assert run.state.workflow_task.started_event_id == 6
    run.fail_wft(0.4)
    assert run.new_events == []
    assert run.state.workflow_task.attempt == 3
    assert run.state.workflow_task.scheduled_event_id == 5


def test_transient_task_events_are_written_on_completion_with_the_same_ids():
    run = Run()
    run.start_wft(0.1)
    run.fail_wft(0.2)
    run.start_wft(10.3, request_id="poll-2")
    assert workflow_task.transient_events(run.state) != []
    [timer] = run.new_timers
    assert (timer.event_id, timer.attempt, timer.fire_at) == (5, 2, at(20.3))

    run.complete_wft(10.5, start_timer("t", 1))

    assert run.types() == [
        "WORKFLOW_EXECUTION_STARTED",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_FAILED",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED",
        "TIMER_STARTED",
    ]
    scheduled, started, completed = run.event(5), run.event(6), run.event(7)
    assert attrs_of(scheduled).attempt == 2
    assert event_time(scheduled) == at(0.2)  # the attempt's own schedule time
    assert event_time(started) == at(10.3)
    assert attrs_of(started).scheduled_event_id == 5
    assert attrs_of(started).request_id == "poll-2"
    assert (attrs_of(completed).scheduled_event_id, attrs_of(completed).started_event_id) == (5, 6)
    assert attrs_of(run.event(8)).workflow_task_completed_event_id == 7
    assert run.state.wft_attempt == 1


def test_timeouts_persist_only_the_first_timed_out_event():
    """FINDINGS s14: 4 WorkflowTaskTimedOut, then attempts 2 and 3 leave nothing until attempt 3 completes."""
    run = Run(start_request(task_timeout=2))
    run.start_wft(0)
    run.timeout_wft(2)

    assert types(run.new_events) == ["WORKFLOW_TASK_TIMED_OUT"]
    timed_out = attrs_of(run.new_events[0])
    assert (timed_out.scheduled_event_id, timed_out.started_event_id) == (2, 3)
    assert timed_out.timeout_type == TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE
    [task] = run.new_tasks
    assert (task.scheduled_event_id, task.attempt, task.visible_at) == (5, 2, at(2))  # no backoff

    run.start_wft(3)
    run.timeout_wft(5)
    assert run.new_events == []
    assert run.state.workflow_task.attempt == 3

    run.start_wft(5.5)
    run.complete_wft(6, complete_workflow())

    assert run.types()[3:] == [
        "WORKFLOW_TASK_TIMED_OUT",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED",
        "WORKFLOW_EXECUTION_COMPLETED",
    ]
    assert attrs_of(run.event(5)).attempt == 3
    assert seconds(attrs_of(run.event(5)).start_to_close_timeout) == 2


# attempt -> start-to-close timeout for a 10 s task timeout: after the third attempt Temporal adds an
# exponential backoff (5 s initial, coefficient 2, at most 10 min) so a failing task retries ever slower.
TIMEOUT_GROWTH = [
    (1, 10),
    (2, 10),
    (3, 10),
    (4, 15),
    (5, 20),
    (6, 30),
    (7, 50),
    (10, 330),
    (11, 610),
    (50, 610),
]


@pytest.mark.parametrize(("attempt", "expected"), TIMEOUT_GROWTH)
def test_start_to_close_timeout_grows_after_the_third_attempt(attempt, expected):
    assert workflow_task.start_to_close_timeout(10.0, attempt) == expected


def test_attempt_four_is_scheduled_with_the_grown_timeout():
    run = Run(start_request(task_timeout=10))
    now = 0.0
    for _ in range(3):  # attempts 1, 2 and 3 time out
        run.start_wft(now)
        now += run.state.workflow_task.timeout
        run.timeout_wft(now)
    wft = run.state.workflow_task
    assert (wft.attempt, wft.timeout) == (4, 15)

    run.start_wft(now)
    assert run.new_timers[0].fire_at == at(now + 15)
    run.complete_wft(now + 1)

    assert attrs_of(run.event(5)).attempt == 4
    assert seconds(attrs_of(run.event(5)).start_to_close_timeout) == 15


def test_transient_task_becomes_normal_when_events_arrived_meanwhile():
    run = Run()
    run.start_wft(0.1)
    run.fail_wft(0.2)  # transient attempt 2 scheduled, id 5 reserved
    run.signal(1, "s")  # written at once (no task in flight): takes id 5

    assert run.types()[-1] == "WORKFLOW_EXECUTION_SIGNALED"
    assert run.history[-1].event_id == 5
    wft = run.start_wft(2)

    assert types(run.new_events) == ["WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED"]
    assert [e.event_id for e in run.new_events] == [6, 7]
    assert attrs_of(run.event(6)).attempt == 1
    assert attrs_of(run.event(7)).scheduled_event_id == 6
    assert (wft.attempt, wft.scheduled_event_id, wft.started_event_id) == (1, 6, 7)
    assert run.state.wft_attempt == 1
    [timer] = run.new_timers
    assert (timer.event_id, timer.attempt) == (6, 1)
    assert workflow_task.transient_events(run.state) == []

    run.complete_wft(3)
    assert types(run.new_events) == ["WORKFLOW_TASK_COMPLETED"]
    assert attrs_of(run.new_events[0]).scheduled_event_id == 6


def test_history_read_shows_the_scheduled_transient_task_and_the_poller_the_started_one():
    run = Run()
    run.start_wft(0.1)
    run.fail_wft(0.2)

    assert workflow_task.transient_events(run.state) == []  # not started: nothing for a poller
    [scheduled] = workflow_task.transient_events(run.state, include_unstarted=True)
    assert (scheduled.event_id, attrs_of(scheduled).attempt, event_time(scheduled)) == (5, 2, at(0.2))

    run.start_wft(0.3)
    events = workflow_task.transient_events(run.state)
    assert types(events) == ["WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED"]
    assert [e.event_id for e in events] == [5, 6]
    assert event_time(events[1]) == at(0.3)


def test_history_read_never_repeats_an_event_id_after_events_arrived_for_a_transient_task():
    run = Run()
    run.start_wft(0.1)
    run.fail_wft(0.2)
    run.signal(1, "s")  # id 5

    suffix = workflow_task.transient_events(run.state, include_unstarted=True)

    ids = [e.event_id for e in run.history] + [e.event_id for e in suffix]
    assert ids == list(range(1, len(ids) + 1))


# --- buffering -----------------------------------------------------------------------------------------


def test_signals_during_a_started_task_are_written_after_its_commands_with_their_arrival_times():
    """FINDINGS s09_signals_during_inflight_wt."""
    run = Run()
    run.start_wft(0.043)
    for i, t in enumerate((0.537, 0.747, 0.954)):
        run.signal(t, f"x{i}")
        assert run.new_events == []
        assert run.new_tasks == []
    assert len(run.state.buffered) == 3

    run.complete_wft(1.56, start_timer("1", 60))

    assert run.types()[3:] == [
        "WORKFLOW_TASK_COMPLETED",
        "TIMER_STARTED",
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    assert [attrs_of(run.event(i)).signal_name for i in (6, 7, 8)] == ["x0", "x1", "x2"]
    assert [event_time(run.event(i)) for i in (4, 5, 6, 7, 8, 9)] == [
        at(1.56),
        at(1.56),
        at(0.537),
        at(0.747),
        at(0.954),
        at(1.56),
    ]
    assert run.state.buffered == []
    assert [(t.scheduled_event_id, t.attempt) for t in run.new_tasks] == [(9, 1)]


def test_activity_result_during_a_started_task_is_rewired_to_its_buffered_started_event():
    run = Run()
    run.run_wft(0.1, schedule_activity("1", start_to_close=30))  # 5 ActivityTaskScheduled
    run.start_activity(1, 5)
    run.signal(2, "wake")  # 6 Signaled, 7 WorkflowTaskScheduled
    run.start_wft(3)  # 8 WorkflowTaskStarted
    run.complete_activity(4, 5, "r")
    assert run.new_events == []
    assert len(run.state.buffered) == 2

    run.complete_wft(5)

    assert types(run.new_events) == [
        "WORKFLOW_TASK_COMPLETED",
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_COMPLETED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    started, result = run.event(10), run.event(11)
    assert attrs_of(started).scheduled_event_id == 5
    assert attrs_of(result).scheduled_event_id == 5
    assert attrs_of(result).started_event_id == 10
    assert event_time(result) == at(4)  # its arrival time (the Started event's time: see test_activity_rules)


def test_cancel_request_during_a_started_task_is_buffered():
    """FINDINGS s11_cancel_inflight_wt."""
    run = Run()
    run.start_wft(0.05)
    run.apply(0.5, lifecycle.request_cancel, identity="client", reason="")
    assert run.new_events == []

    run.complete_wft(1.5, start_timer("1", 60))

    assert run.types()[3:] == [
        "WORKFLOW_TASK_COMPLETED",
        "TIMER_STARTED",
        "WORKFLOW_EXECUTION_CANCEL_REQUESTED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    run.run_wft(2, cancel_workflow())
    assert run.state.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CANCELED


@pytest.mark.parametrize("close", [complete_workflow, fail_workflow, cancel_workflow])
def test_close_command_meeting_buffered_events_fails_the_task_as_unhandled_command(close):
    """FINDINGS s09_signals_during_inflight_wt_then_complete."""
    run = Run()
    run.start_wft(0.04)
    run.signal(0.5, "s0")
    run.signal(0.7, "s1")

    failure = run.complete_wft(1.5, start_timer("t", 5), close())

    assert failure is not None
    assert failure.cause == Cause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND
    assert run.types() == [
        "WORKFLOW_EXECUTION_STARTED",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_FAILED",
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    failed = attrs_of(run.event(4))
    assert (failed.scheduled_event_id, failed.started_event_id) == (2, 3)
    assert failed.cause == Cause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND
    assert failed.failure.message == "UnhandledCommand"
    assert failed.failure.HasField("server_failure_info")
    assert failed.identity == WORKER
    # not a transient retry: the next task is attempt 1 and written
    assert attrs_of(run.event(7)).attempt == 1
    wft = run.state.workflow_task
    assert (wft.attempt, wft.scheduled_event_id) == (1, 7)
    assert run.state.timers == {}
    assert run.state.running

    run.run_wft(2, close())
    assert not run.state.running


def test_close_command_without_buffered_events_is_accepted_even_after_signals_were_seen():
    run = Run()
    run.signal(0.01, "before")  # appended before the task started: the task sees it
    run.run_wft(1, complete_workflow())
    assert run.state.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED


def test_timeout_with_buffered_events_schedules_a_normal_task_after_them():
    run = Run(start_request(task_timeout=5))
    run.start_wft(0)
    run.signal(1, "s")

    run.timeout_wft(5)

    assert types(run.new_events) == [
        "WORKFLOW_TASK_TIMED_OUT",
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    assert attrs_of(run.new_events[2]).attempt == 1
    assert run.state.workflow_task.attempt == 1


def test_transient_failure_with_buffered_events_writes_them_and_a_normal_task():
    run = Run()
    run.start_wft(0)
    run.fail_wft(0.1)
    run.start_wft(0.2)  # transient attempt 2, in flight
    run.signal(0.3, "s")
    assert run.new_events == []

    run.fail_wft(0.4)

    assert types(run.new_events) == ["WORKFLOW_EXECUTION_SIGNALED", "WORKFLOW_TASK_SCHEDULED"]
    assert [e.event_id for e in run.new_events] == [5, 6]
    assert attrs_of(run.new_events[1]).attempt == 1


# --- stale inputs --------------------------------------------------------------------------------------


def _started_run() -> Run:
    run = Run(start_request(task_timeout=10))
    run.start_wft(1)
    return run


def _completed_run() -> Run:
    run = _started_run()
    run.complete_wft(2, start_timer("t", 60))
    return run


def _start(run: Run, sid: int, attempt: int) -> None:
    run.apply(5, workflow_task.start, scheduled_event_id=sid, attempt=attempt, request_id="r", identity="w")


def _complete(run: Run, sid: int, started: int, attempt: int = 1) -> None:
    run.complete_wft(5, token=(sid, started, attempt))


def _fail(run: Run, sid: int, started: int, attempt: int = 1) -> None:
    run.fail_wft(5, token=(sid, started, attempt))


def _time_out(run: Run, sid: int, attempt: int) -> None:
    run.apply(20, workflow_task.time_out, scheduled_event_id=sid, attempt=attempt)


STALE = [
    ("start: unknown scheduled id", Run, lambda r: _start(r, 99, 1)),
    ("start: wrong attempt", Run, lambda r: _start(r, 2, 2)),
    ("start: twice", _started_run, lambda r: _start(r, 2, 1)),
    ("complete: not started", Run, lambda r: _complete(r, 2, 3)),
    ("complete: wrong started id", _started_run, lambda r: _complete(r, 2, 4)),
    ("complete: wrong scheduled id", _started_run, lambda r: _complete(r, 5, 3)),
    ("complete: replayed token", _completed_run, lambda r: _complete(r, 2, 3)),
    ("complete: other attempt", _started_run, lambda r: _complete(r, 2, 3, attempt=2)),
    ("fail: other attempt", _started_run, lambda r: _fail(r, 2, 3, attempt=2)),
    ("fail: replayed token", _completed_run, lambda r: _fail(r, 2, 3)),
    ("time out: task completed", _completed_run, lambda r: _time_out(r, 2, 1)),
    ("time out: not started", Run, lambda r: _time_out(r, 2, 1)),
    ("time out: other attempt", _started_run, lambda r: _time_out(r, 2, 2)),
]


@pytest.mark.parametrize(("make", "act"), [s[1:] for s in STALE], ids=[s[0] for s in STALE])
def test_stale_workflow_task_inputs_raise_stale_task_and_change_nothing(make, act):
    run = make()
    before, history = run.copy_state(), list(run.history)

    with pytest.raises(StaleTask):
        act(run)

    assert run.copy_state() == before
    assert run.history == history


def test_old_attempt_token_and_timer_are_stale_after_a_timeout():
    """FINDINGS s14: the attempt-1 token after the timeout gets "Workflow task not found."."""
    run = Run(start_request(task_timeout=2))
    run.start_wft(0)
    old_token = run.wft_token()
    run.timeout_wft(2)
    run.start_wft(3)  # attempt 2 runs, started id 6

    with pytest.raises(StaleTask):
        run.complete_wft(3.5, token=old_token)
    with pytest.raises(StaleTask):
        _time_out(run, 2, 1)
    run.complete_wft(3.6)
    with pytest.raises(StaleTask):  # the attempt-2 timer fires after that attempt completed
        _time_out(run, 5, 2)


def test_a_late_answer_to_a_timed_out_transient_attempt_is_stale_for_the_attempt_that_replaced_it():
    """Transient attempts share the scheduled and started ids: only the attempt tells their tokens apart.

    Seen with the SDK: attempt 3 timed out while its answer was on the wire, attempt 4 started with the
    same ids, the attempt-3 answer completed attempt 4, and the worker holding attempt 4 then got "not
    found" and evicted the run (cancelling its local activities).
    """
    run = Run(start_request(task_timeout=1))
    run.start_wft(0)
    run.timeout_wft(1)
    run.start_wft(1.1)  # attempt 2, transient
    late_token = run.wft_token()
    run.timeout_wft(2.1)
    run.start_wft(2.2)  # attempt 3: the same ids as attempt 2
    assert run.wft_token()[:2] == late_token[:2]
    assert run.wft_token()[2] == 3

    for act in (lambda: run.complete_wft(2.3, token=late_token), lambda: run.fail_wft(2.3, token=late_token)):
        before, history = run.copy_state(), list(run.history)
        with pytest.raises(StaleTask):
            act()
        assert run.copy_state() == before
        assert run.history == history
    run.complete_wft(2.4)
    assert "WORKFLOW_TASK_COMPLETED" in run.types()


def test_event_times_of_a_whole_scenario_use_the_fixed_clock():
    run = Run()
    run.start_wft(1)
    run.complete_wft(2, start_timer("t", 3))
    run.fire_timer(5, "t")
    assert [event_time(e) - at(0) for e in run.history] == [
        timedelta(seconds=s) for s in (0, 0, 1, 2, 2, 5, 5)
    ]


def test_unhandled_command_on_a_transient_task_writes_no_failed_event():
    run = Run()
    run.start_wft(0)
    run.fail_wft(0.1)
    run.start_wft(0.2)  # transient attempt 2
    run.signal(0.3, "s")

    failure = run.complete_wft(0.4, complete_workflow())

    assert failure is not None
    assert failure.cause == Cause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND
    assert types(run.new_events) == ["WORKFLOW_EXECUTION_SIGNALED", "WORKFLOW_TASK_SCHEDULED"]
    assert [e.event_id for e in run.new_events] == [5, 6]
    assert attrs_of(run.new_events[1]).attempt == 1


def test_marker_is_recorded_and_a_marker_without_name_fails_the_task():
    run = Run()
    run.run_wft(1, record_marker("Version"))
    assert types(run.new_events) == ["WORKFLOW_TASK_COMPLETED", "MARKER_RECORDED"]
    marker = attrs_of(run.new_events[1])
    assert (marker.marker_name, marker.workflow_task_completed_event_id) == ("Version", 4)

    run.signal(2, "s")
    failure = run.run_wft(3, record_marker(""))
    assert failure is not None
    assert failure.cause == Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_RECORD_MARKER_ATTRIBUTES
    assert types(run.new_events) == ["WORKFLOW_TASK_FAILED"]
