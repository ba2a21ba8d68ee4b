"""Run lifecycle rules: start, signals, cancel requests, termination, run timeouts and the close commands."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import (
    RetryState,
    TaskQueueKind,
    WorkflowExecutionStatus,
    WorkflowTaskFailedCause,
)

from engine.history import lifecycle, workflow_task
from engine.history.errors import RunClosed, StaleTask
from engine.history.events import seconds
from engine.history.mutation import TaskKind, TimerKind
from tests.unit.history_harness import (
    RUN_ID,
    TASK_QUEUE,
    WORKER,
    Run,
    at,
    attrs_of,
    cancel_workflow,
    complete_workflow,
    fail_workflow,
    payloads,
    schedule_activity,
    start_request,
    start_timer,
    types,
)

Status = WorkflowExecutionStatus

# --- start ---------------------------------------------------------------------------------------------


def test_start_writes_started_and_first_workflow_task():
    run = Run(start_request(), now=0)

    assert run.types() == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED"]
    assert [e.event_id for e in run.history] == [1, 2]
    started = attrs_of(run.event(1))
    assert started.workflow_type.name == "MyWorkflow"
    assert started.task_queue.name == TASK_QUEUE
    assert started.task_queue.kind == TaskQueueKind.TASK_QUEUE_KIND_NORMAL
    assert started.attempt == 1
    assert started.original_execution_run_id == RUN_ID
    assert started.first_execution_run_id == RUN_ID
    assert started.workflow_id == "wf-1"
    assert started.identity == "client-1"
    assert started.HasField("first_workflow_task_backoff")
    assert seconds(started.first_workflow_task_backoff) == 0
    scheduled = attrs_of(run.event(2))
    assert scheduled.attempt == 1
    assert seconds(scheduled.start_to_close_timeout) == 10
    assert scheduled.task_queue.name == TASK_QUEUE
    assert scheduled.task_queue.kind == TaskQueueKind.TASK_QUEUE_KIND_NORMAL
    assert run.event(1).event_time.ToDatetime().replace(tzinfo=at(0).tzinfo) == at(0)

    [task] = run.new_tasks
    assert (task.kind, task.task_queue, task.scheduled_event_id, task.attempt, task.visible_at) == (
        TaskKind.WORKFLOW,
        TASK_QUEUE,
        2,
        1,
        at(0),
    )
    assert run.new_timers == []  # no run timeout, no timer
    state = run.state
    assert state.running
    assert state.next_event_id == 3
    assert state.workflow_task is not None
    assert state.workflow_task.scheduled_event_id == 2
    assert state.workflow_task.started_event_id == 0
    assert state.start_request_id == "start-req-1"


# (execution, run, task) requested -> (execution, run, task) in effect. Temporal: task default 10s, capped at
# 120s and at the run timeout; run timeout = execution timeout when unset, and never above it.
TIMEOUT_TABLE = [
    ((0, 0, 0), (0, 0, 10)),
    ((0, 0, 1000), (0, 0, 120)),
    ((0, 0, 120), (0, 0, 120)),
    ((0, 0, 3), (0, 0, 3)),
    ((0, 2, 0), (0, 2, 2)),
    ((0, 5, 3), (0, 5, 3)),
    ((0, 300, 200), (0, 300, 120)),
    ((60, 0, 0), (60, 60, 10)),
    ((2, 0, 0), (2, 2, 2)),
    ((5, 10, 0), (5, 5, 5)),
    ((5, 2, 0), (5, 2, 2)),
    ((600, 300, 0), (600, 300, 10)),
]


@pytest.mark.parametrize(("requested", "expected"), TIMEOUT_TABLE, ids=[str(r) for r, _ in TIMEOUT_TABLE])
def test_start_timeouts_defaults_and_caps(requested, expected):
    execution, run_timeout, task = requested
    request = start_request(execution_timeout=execution, run_timeout=run_timeout, task_timeout=task)

    assert lifecycle.effective_timeouts(request) == pytest.approx(expected)
    run = Run(request, now=0)

    exp_execution, exp_run, exp_task = expected
    started = attrs_of(run.event(1))
    assert started.HasField("workflow_execution_timeout") == bool(exp_execution)
    assert started.HasField("workflow_run_timeout") == bool(exp_run)
    assert seconds(started.workflow_execution_timeout) == exp_execution
    assert seconds(started.workflow_run_timeout) == exp_run
    assert seconds(started.workflow_task_timeout) == exp_task
    assert seconds(attrs_of(run.event(2)).start_to_close_timeout) == exp_task
    assert started.HasField("workflow_execution_expiration_time") == bool(exp_execution)
    if exp_execution:
        assert started.workflow_execution_expiration_time.ToDatetime(tzinfo=at(0).tzinfo) == at(exp_execution)
    state = run.state
    assert (state.execution_timeout, state.run_timeout, state.workflow_task_timeout) == expected
    assert state.run_expiration == (at(exp_run) if exp_run else None)
    assert state.execution_expiration == (at(exp_execution) if exp_execution else None)
    run_timers = [t for t in run.new_timers if t.kind == TimerKind.WORKFLOW_RUN_TIMEOUT]
    assert [t.fire_at for t in run_timers] == ([at(exp_run)] if exp_run else [])


def test_execution_expiration_time_is_rounded_to_the_millisecond():
    run = Run(start_request(execution_timeout=60), now=0.1234567)  # now has sub-millisecond digits

    expiration = attrs_of(run.event(1)).workflow_execution_expiration_time
    assert expiration.nanos % 1_000_000 == 0


def test_signal_with_start_writes_the_signal_before_the_first_task():
    run = Run(start_request(), now=0, schedule_first_task=False)
    assert run.types() == ["WORKFLOW_EXECUTION_STARTED"]
    assert run.new_tasks == []

    run.signal(0, "sig", request_id="sws-1", value="x")

    assert run.types() == [
        "WORKFLOW_EXECUTION_STARTED",
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    assert [(t.kind, t.scheduled_event_id) for t in run.new_tasks] == [(TaskKind.WORKFLOW, 3)]


# --- signals -------------------------------------------------------------------------------------------


def test_signal_while_idle_writes_signaled_and_schedules_a_task():
    run = Run()
    run.run_wft(1, start_timer("t", 60))

    run.signal(2, "go", request_id="r1", value="v")

    assert types(run.new_events) == ["WORKFLOW_EXECUTION_SIGNALED", "WORKFLOW_TASK_SCHEDULED"]
    signaled = attrs_of(run.new_events[0])
    assert signaled.signal_name == "go"
    assert signaled.identity == "client-1"
    assert signaled.input == payloads("v")
    assert not signaled.HasField("header")
    assert [(t.kind, t.scheduled_event_id) for t in run.new_tasks] == [(TaskKind.WORKFLOW, 7)]


def test_signal_while_a_task_is_only_scheduled_is_appended_without_a_second_task():
    run = Run()
    run.run_wft(1, start_timer("t", 60))
    run.signal(2, "a")
    run.signal(3, "b")  # the task of event 7 is scheduled, not started

    assert types(run.new_events) == ["WORKFLOW_EXECUTION_SIGNALED"]
    assert run.new_tasks == []
    assert run.types()[-3:] == [
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_EXECUTION_SIGNALED",
    ]


SIGNAL_DEDUP = [
    # request ids of consecutive signals -> how many Signaled events
    (["r1", "r1"], 1),
    (["r1", "r2"], 2),
    (["r1", "r2", "r1", "r2"], 2),
    (["", ""], 2),  # no request id, no deduplication
]


@pytest.mark.parametrize(("request_ids", "expected"), SIGNAL_DEDUP, ids=[str(r) for r, _ in SIGNAL_DEDUP])
def test_signal_is_deduplicated_by_request_id(request_ids, expected):
    run = Run()
    run.run_wft(1, start_timer("t", 60))

    for i, request_id in enumerate(request_ids):
        run.signal(2 + i, f"s{i}", request_id=request_id)

    assert run.types().count("WORKFLOW_EXECUTION_SIGNALED") == expected


def test_signal_on_a_closed_run_raises_run_closed_and_writes_nothing():
    run = Run()
    run.run_wft(1, complete_workflow())
    before = len(run.history)

    with pytest.raises(RunClosed):
        run.signal(2, "late", request_id="r")

    assert len(run.history) == before


# --- cancel requests -----------------------------------------------------------------------------------


def test_cancel_request_writes_one_event_and_a_task_and_is_idempotent():
    run = Run()
    run.run_wft(1, start_timer("t", 60))

    run.apply(2, lifecycle.request_cancel, identity="client-1", reason="why")
    assert types(run.new_events) == ["WORKFLOW_EXECUTION_CANCEL_REQUESTED", "WORKFLOW_TASK_SCHEDULED"]
    requested = attrs_of(run.new_events[0])
    assert (requested.cause, requested.identity) == ("why", "client-1")
    assert run.state.cancel_requested

    run.apply(3, lifecycle.request_cancel, identity="client-2", reason="again")
    assert run.new_events == []
    assert run.new_tasks == []

    run.run_wft(4, cancel_workflow())
    assert run.state.status == Status.WORKFLOW_EXECUTION_STATUS_CANCELED
    assert run.types()[-1] == "WORKFLOW_EXECUTION_CANCELED"
    assert attrs_of(run.history[-1]).workflow_task_completed_event_id == run.history[-2].event_id


def test_cancel_request_with_an_empty_reason_has_no_cause():
    run = Run()
    run.run_wft(1, start_timer("t", 60))
    run.apply(2, lifecycle.request_cancel, identity="client-1", reason="")
    assert not attrs_of(run.new_events[0]).cause


def test_cancel_request_on_a_closed_run_is_a_silent_no_op():
    run = Run()
    run.run_wft(1, complete_workflow())
    before = len(run.history)

    run.apply(2, lifecycle.request_cancel, identity="client-1", reason="late")

    assert run.new_events == []
    assert len(run.history) == before
    assert run.state.status == Status.WORKFLOW_EXECUTION_STATUS_COMPLETED


# --- terminate -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "expected"),
    [("", "terminated by user via frontend"), ("operator says so", "operator says so")],
)
def test_terminate_while_idle_writes_only_terminated(reason, expected):
    run = Run()
    run.run_wft(1, start_timer("t", 60), schedule_activity("a1", start_to_close=10))
    assert run.state.timers
    assert run.state.activities

    run.apply(2, lifecycle.terminate, reason=reason, details=payloads("d"), identity="admin")

    assert types(run.new_events) == ["WORKFLOW_EXECUTION_TERMINATED"]
    terminated = attrs_of(run.new_events[0])
    assert (terminated.reason, terminated.identity) == (expected, "admin")
    assert terminated.details == payloads("d")
    state = run.state
    assert state.status == Status.WORKFLOW_EXECUTION_STATUS_TERMINATED
    assert state.close_event_id == run.new_events[0].event_id
    assert state.close_time == at(2)
    assert (state.timers, state.activities, state.workflow_task, state.buffered) == ({}, {}, None, [])
    assert run.last.closed
    assert run.new_tasks == []
    assert run.new_timers == []


def test_terminate_with_a_started_workflow_task_fails_it_first():
    run = Run()
    run.start_wft(0.04)
    token = run.wft_token()
    run.signal(0.5, "s1")  # buffered

    run.apply(1, lifecycle.terminate, reason="", details=None, identity="admin")

    assert run.types() == [
        "WORKFLOW_EXECUTION_STARTED",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_FAILED",
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_EXECUTION_TERMINATED",
    ]
    failed = attrs_of(run.event(4))
    assert (failed.scheduled_event_id, failed.started_event_id) == (2, 3)
    assert failed.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND
    assert failed.identity == "history-service"
    assert not failed.HasField("failure")
    assert attrs_of(run.event(6)).reason == "terminated by user via frontend"
    assert run.event(5).event_time.ToDatetime(tzinfo=at(0).tzinfo) == at(0.5)  # kept its arrival time

    with pytest.raises(StaleTask):  # the worker's late completion: "Workflow task not found."
        run.complete_wft(2, complete_workflow(), token=token)


def test_terminate_with_a_scheduled_but_unstarted_task_writes_no_task_event():
    run = Run()
    run.apply(1, lifecycle.terminate, reason="r", details=None, identity="admin")
    assert types(run.new_events) == ["WORKFLOW_EXECUTION_TERMINATED"]


def test_terminate_with_a_started_transient_task_writes_no_task_event():
    run = Run()
    run.start_wft(1)
    run.fail_wft(2)  # attempt 1 failed: WorkflowTaskFailed written, attempt 2 is transient
    run.start_wft(3)
    assert run.state.workflow_task.attempt == 2

    run.apply(4, lifecycle.terminate, reason="r", details=None, identity="admin")

    assert types(run.new_events) == ["WORKFLOW_EXECUTION_TERMINATED"]
    assert run.new_events[0].event_id == 5  # the transient task's ids were never used


def test_terminate_a_closed_run_raises_run_closed():
    run = Run()
    run.run_wft(1, complete_workflow())
    with pytest.raises(RunClosed):
        run.apply(2, lifecycle.terminate, reason="", details=None, identity="admin")


# --- run and execution timeouts ------------------------------------------------------------------------

RUN_TIMEOUTS = [
    # (execution timeout, run timeout) -> retry state of WorkflowExecutionTimedOut (FINDINGS s15)
    ((0, 2), RetryState.RETRY_STATE_RETRY_POLICY_NOT_SET),
    ((2, 0), RetryState.RETRY_STATE_TIMEOUT),
    ((5, 2), RetryState.RETRY_STATE_RETRY_POLICY_NOT_SET),
    ((2, 2), RetryState.RETRY_STATE_TIMEOUT),
]


@pytest.mark.parametrize(("timeouts", "retry_state"), RUN_TIMEOUTS, ids=[str(t) for t, _ in RUN_TIMEOUTS])
def test_run_timeout_closes_the_run_with_its_retry_state(timeouts, retry_state):
    execution, run_timeout = timeouts
    run = Run(start_request(execution_timeout=execution, run_timeout=run_timeout), now=0)
    run.run_wft(0.1, start_timer("1", 60))
    [timer] = [t for t in run.steps[0].timers if t.kind == TimerKind.WORKFLOW_RUN_TIMEOUT]
    assert timer.fire_at == at(2)

    run.apply(2, lifecycle.run_timeout)

    assert run.types()[-2:] == ["TIMER_STARTED", "WORKFLOW_EXECUTION_TIMED_OUT"]  # no TimerCanceled
    assert attrs_of(run.history[-1]).retry_state == retry_state
    assert run.state.status == Status.WORKFLOW_EXECUTION_STATUS_TIMED_OUT
    assert run.state.timers == {}
    assert run.last.closed


def test_run_timeout_before_it_is_due_or_after_close_is_stale():
    run = Run(start_request(run_timeout=10))
    with pytest.raises(StaleTask):
        run.apply(9.999, lifecycle.run_timeout)
    run.run_wft(1, complete_workflow())
    with pytest.raises(StaleTask):
        run.apply(10, lifecycle.run_timeout)


def test_run_timeout_writes_buffered_events_before_timing_out():
    run = Run(start_request(run_timeout=5))
    run.start_wft(1)
    run.signal(2, "s")
    run.apply(5, lifecycle.run_timeout)
    assert "WORKFLOW_EXECUTION_SIGNALED" in types(run.new_events)
    assert run.types()[-1] == "WORKFLOW_EXECUTION_TIMED_OUT"


def test_run_timeout_with_a_started_workflow_task_fails_it_first():
    run = Run(start_request(run_timeout=5))
    run.start_wft(1)

    run.apply(5, lifecycle.run_timeout)

    assert types(run.new_events) == ["WORKFLOW_TASK_FAILED", "WORKFLOW_EXECUTION_TIMED_OUT"]
    failed = attrs_of(run.new_events[0])
    assert failed.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND
    assert failed.identity == workflow_task.HISTORY_SERVICE_IDENTITY


# --- the close commands --------------------------------------------------------------------------------

CLOSE_COMMANDS = [
    (complete_workflow, "WORKFLOW_EXECUTION_COMPLETED", Status.WORKFLOW_EXECUTION_STATUS_COMPLETED),
    (fail_workflow, "WORKFLOW_EXECUTION_FAILED", Status.WORKFLOW_EXECUTION_STATUS_FAILED),
    (cancel_workflow, "WORKFLOW_EXECUTION_CANCELED", Status.WORKFLOW_EXECUTION_STATUS_CANCELED),
]


@pytest.mark.parametrize(("command", "event", "status"), CLOSE_COMMANDS, ids=[c[1] for c in CLOSE_COMMANDS])
def test_close_command_closes_the_run(command, event, status):
    run = Run()
    run.start_wft(1)
    run.complete_wft(2, command())

    assert types(run.new_events) == ["WORKFLOW_TASK_COMPLETED", event]
    closed = attrs_of(run.new_events[1])
    assert closed.workflow_task_completed_event_id == 4
    assert run.state.status == status
    assert run.state.close_event_id == 5
    assert run.state.close_time == at(2)
    assert run.last.closed
    assert run.new_tasks == []
    if event == "WORKFLOW_EXECUTION_FAILED":
        assert closed.retry_state == RetryState.RETRY_STATE_RETRY_POLICY_NOT_SET
        assert closed.failure.message == "wf failed"
    if event == "WORKFLOW_EXECUTION_COMPLETED":
        assert closed.result == payloads("done")


def test_only_the_first_close_command_counts_and_later_commands_are_ignored():
    run = Run()
    run.run_wft(
        1, complete_workflow("first"), fail_workflow(), start_timer("t", 5), complete_workflow("second")
    )

    assert types(run.new_events) == ["WORKFLOW_TASK_COMPLETED", "WORKFLOW_EXECUTION_COMPLETED"]
    assert attrs_of(run.new_events[1]).result == payloads("first")
    assert run.state.timers == {}


def test_commands_before_the_close_command_are_written_in_order():
    run = Run()
    run.run_wft(1, start_timer("t", 5), complete_workflow())
    assert types(run.new_events) == [
        "WORKFLOW_TASK_COMPLETED",
        "TIMER_STARTED",
        "WORKFLOW_EXECUTION_COMPLETED",
    ]
    assert run.state.timers == {}  # closing dropped it


def test_closed_run_rejects_every_task_input():
    run = Run()
    run.run_wft(1, schedule_activity("a", start_to_close=5), start_timer("t", 5))
    run.start_activity(2, 5)
    run.apply(3, lifecycle.terminate, reason="", details=None, identity="admin")
    state_before = run.copy_state()

    with pytest.raises(StaleTask):
        run.apply(4, workflow_task.start, scheduled_event_id=2, attempt=1, request_id="r", identity=WORKER)
    with pytest.raises(StaleTask):
        run.apply(4, lifecycle.run_timeout)
    assert run.copy_state() == state_before
    assert run.state.close_time == at(3)
    assert run.state.close_time - run.state.start_time == timedelta(seconds=3)
