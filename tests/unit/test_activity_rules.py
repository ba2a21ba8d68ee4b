"""Activity rules: scheduling and its normalisation, start, retries without events, timeouts, cancellation."""

from __future__ import annotations

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.common.v1 import Payload, RetryPolicy
from temporalio.api.enums.v1 import RetryState, TimeoutType, WorkflowTaskFailedCause
from temporalio.api.failure.v1 import Failure

from engine.errors import EngineError
from engine.history import activity
from engine.history.errors import RunClosed, StaleTask
from engine.history.events import seconds
from engine.history.mutation import TaskKind, TimerKind
from tests.unit.history_harness import (
    TASK_QUEUE,
    WORKER,
    Run,
    app_failure,
    at,
    attrs_of,
    complete_workflow,
    dur,
    payloads,
    request_cancel_activity,
    schedule_activity,
    start_request,
    types,
)

Cause = WorkflowTaskFailedCause
STC = TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE
S2S = TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START
S2C = TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE
HB = TimeoutType.TIMEOUT_TYPE_HEARTBEAT
NOT_ENOUGH_TIME = (
    "Not enough time to schedule next retry before activity ScheduleToClose timeout, giving up retrying"
)


def event_time(event):
    return event.event_time.ToDatetime(tzinfo=at(0).tzinfo)


def scheduled_run(*, run_timeout: float = 0, now: float = 0.1, **command) -> Run:
    """A run whose first workflow task scheduled activity "1" (ActivityTaskScheduled is event 5)."""
    run = Run(start_request(run_timeout=run_timeout))
    failure = run.run_wft(now, schedule_activity("1", **command))
    assert failure is None, failure
    assert run.history[4].event_id == 5
    return run


def policy(**fields) -> RetryPolicy:
    result = RetryPolicy(maximum_attempts=fields.pop("maximum_attempts", 0))
    for name in ("initial_interval", "maximum_interval"):
        if name in fields:
            getattr(result, name).CopyFrom(dur(fields.pop(name)))
    result.backoff_coefficient = fields.pop("backoff_coefficient", 0)
    result.non_retryable_error_types.extend(fields.pop("non_retryable_error_types", []))
    assert not fields
    return result


def timeout_failure(message: str, timeout_type: int) -> Failure:
    failure = Failure(message=message, source="Server")
    failure.timeout_failure_info.timeout_type = timeout_type
    return failure


# --- scheduling ----------------------------------------------------------------------------------------

# (run timeout, schedule_to_close, schedule_to_start, start_to_close, heartbeat) requested
#   -> (schedule_to_close, schedule_to_start, start_to_close, heartbeat) written and enforced
NORMALISATION = [
    ((0, 0, 0, 10, 0), (0, 0, 10, 0)),
    ((0, 0, 0, 10, 30), (0, 0, 10, 10)),
    ((0, 0, 0, 10, 3), (0, 0, 10, 3)),
    ((0, 0, 4, 10, 0), (0, 4, 10, 0)),
    ((0, 60, 0, 0, 0), (60, 60, 60, 0)),
    ((0, 60, 5, 100, 0), (60, 5, 60, 0)),
    ((0, 60, 100, 10, 0), (60, 60, 10, 0)),
    ((30, 60, 0, 0, 0), (30, 30, 30, 0)),
    ((30, 0, 0, 10, 0), (30, 30, 10, 0)),
    ((30, 0, 5, 10, 0), (30, 5, 10, 0)),
    ((30, 0, 50, 10, 0), (30, 30, 10, 0)),
]


@pytest.mark.parametrize(("requested", "expected"), NORMALISATION, ids=[str(r) for r, _ in NORMALISATION])
def test_schedule_normalises_timeouts(requested, expected):
    run_timeout, s2c, s2s, st2c, hb = requested
    run = scheduled_run(
        run_timeout=run_timeout,
        schedule_to_close=s2c,
        schedule_to_start=s2s,
        start_to_close=st2c,
        heartbeat=hb,
    )

    scheduled = attrs_of(run.event(5))
    written = tuple(
        seconds(getattr(scheduled, f))
        for f in (
            "schedule_to_close_timeout",
            "schedule_to_start_timeout",
            "start_to_close_timeout",
            "heartbeat_timeout",
        )
    )
    assert written == expected
    # unset timeouts are still written, as "0s"
    assert scheduled.HasField("schedule_to_close_timeout")
    assert scheduled.HasField("heartbeat_timeout")
    info = run.state.activities[5]
    assert (info.schedule_to_close, info.schedule_to_start, info.start_to_close, info.heartbeat) == expected


def test_start_to_close_alone_is_capped_at_the_run_timeout():
    run = scheduled_run(run_timeout=30, start_to_close=60, heartbeat=45)
    scheduled = attrs_of(run.event(5))
    assert seconds(scheduled.start_to_close_timeout) == 30
    assert seconds(scheduled.heartbeat_timeout) == 30


def test_schedule_writes_the_event_a_task_and_its_timers():
    run = scheduled_run(schedule_to_close=60, schedule_to_start=5, start_to_close=10)

    scheduled = attrs_of(run.event(5))
    assert scheduled.activity_id == "1"
    assert scheduled.activity_type.name == "do_it"
    assert scheduled.task_queue.name == TASK_QUEUE  # defaults to the workflow's queue
    assert scheduled.workflow_task_completed_event_id == 4
    assert scheduled.input == payloads("arg")
    [task] = run.new_tasks
    assert (task.kind, task.task_queue, task.scheduled_event_id, task.attempt, task.visible_at) == (
        TaskKind.ACTIVITY,
        TASK_QUEUE,
        5,
        1,
        at(0.1),
    )
    timers = sorted(
        (t.detail, t.fire_at, t.attempt) for t in run.new_timers if t.kind == TimerKind.ACTIVITY_TIMEOUT
    )
    assert timers == sorted([(S2C, at(60.1), 0), (S2S, at(5.1), 1)])


@pytest.mark.parametrize(
    ("command", "timer_details"),
    [
        ({"start_to_close": 10}, []),
        ({"schedule_to_close": 10}, [S2C]),  # schedule-to-start = schedule-to-close: one timer covers both
        ({"start_to_close": 10, "schedule_to_start": 3}, [S2S]),
    ],
)
def test_schedule_arms_only_the_timers_that_can_fire_first(command, timer_details):
    run = scheduled_run(**command)
    assert sorted(t.detail for t in run.new_timers if t.kind == TimerKind.ACTIVITY_TIMEOUT) == timer_details


def test_activity_task_queue_of_the_command_is_used():
    run = scheduled_run(start_to_close=10, task_queue="other-q")
    assert attrs_of(run.event(5)).task_queue.name == "other-q"
    assert run.new_tasks[0].task_queue == "other-q"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, (1, 2.0, 100, 0)),
        (policy(initial_interval=3), (3, 2.0, 300, 0)),
        (policy(maximum_attempts=5, backoff_coefficient=1.5), (1, 1.5, 100, 5)),
        (
            policy(initial_interval=2, maximum_interval=7, backoff_coefficient=3, maximum_attempts=2),
            (2, 3, 7, 2),
        ),
    ],
    ids=["unset", "initial-3s", "attempts-and-coefficient", "all-given"],
)
def test_schedule_fills_in_the_default_retry_policy(given, expected):
    run = scheduled_run(start_to_close=10, retry_policy=given)
    written = attrs_of(run.event(5)).retry_policy
    assert (
        seconds(written.initial_interval),
        written.backoff_coefficient,
        seconds(written.maximum_interval),
        written.maximum_attempts,
    ) == expected


def _negative() -> Duration:
    return Duration(seconds=-1)


BAD_SCHEDULES = [
    (
        "no activity id",
        {"activity_id": ""},
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES,
    ),
    (
        "id too long",
        {"activity_id": "x" * 1001},
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES,
    ),
    ("no type", {"activity_type": ""}, Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES),
    ("no timeouts", {"start_to_close": 0}, Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES),
    (
        "negative",
        {"negative": "heartbeat_timeout"},
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES,
    ),
    (
        "bad retry policy",
        {"retry_policy": policy(backoff_coefficient=0.5)},
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES,
    ),
    ("duplicate id", {"duplicate": True}, Cause.WORKFLOW_TASK_FAILED_CAUSE_SCHEDULE_ACTIVITY_DUPLICATE_ID),
    (
        "retry jitter header out of range",
        {"jitter": b"1.5"},
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES,
    ),
]


@pytest.mark.parametrize(
    ("change", "cause"), [b[1:] for b in BAD_SCHEDULES], ids=[b[0] for b in BAD_SCHEDULES]
)
def test_bad_schedule_command_fails_the_workflow_task(change, cause):
    change = dict(change)
    activity_id = change.pop("activity_id", "1")
    negative = change.pop("negative", None)
    duplicate = change.pop("duplicate", False)
    jitter = change.pop("jitter", None)
    command = schedule_activity(activity_id, **{"start_to_close": 10, **change})
    if jitter is not None:
        command.schedule_activity_task_command_attributes.header.fields["perdura-retry-jitter"].CopyFrom(
            Payload(metadata={"encoding": b"json/plain"}, data=jitter)
        )
    if negative:
        getattr(command.schedule_activity_task_command_attributes, negative).CopyFrom(_negative())
    commands = [schedule_activity("1", start_to_close=5), command] if duplicate else [command]
    run = Run()
    run.start_wft(1)

    failure = run.complete_wft(2, *commands)

    assert failure is not None
    assert failure.cause == cause
    assert run.types()[3:] == ["WORKFLOW_TASK_FAILED"]  # no ActivityTaskScheduled, no WorkflowTaskCompleted
    failed = attrs_of(run.event(4))
    assert failed.cause == cause
    assert failed.failure.server_failure_info.non_retryable
    assert run.state.activities == {}
    assert run.state.workflow_task.attempt == 2  # retried as a transient task


def test_duplicate_activity_id_in_a_later_task_fails_it():
    run = scheduled_run(start_to_close=10)
    run.signal(1, "s")
    failure = run.run_wft(2, schedule_activity("1", start_to_close=10))
    assert failure is not None
    assert failure.cause == Cause.WORKFLOW_TASK_FAILED_CAUSE_SCHEDULE_ACTIVITY_DUPLICATE_ID


# --- start, complete ------------------------------------------------------------------------------------


def test_start_writes_no_event_and_arms_start_to_close_and_heartbeat_timers():
    run = scheduled_run(start_to_close=10, heartbeat=3)

    info = run.start_activity(1, 5, identity="aw")

    assert run.new_events == []
    assert (info.started_time, info.started_identity, info.attempt) == (at(1), "aw", 1)
    assert sorted((t.detail, t.fire_at, t.attempt) for t in run.new_timers) == sorted(
        [(STC, at(11), 1), (HB, at(4), 1)]
    )


def test_completion_writes_started_and_completed_then_a_workflow_task():
    run = scheduled_run(start_to_close=10)
    run.start_activity(1, 5, identity="aw")
    run.complete_activity(2, 5, "the result")

    assert types(run.new_events) == [
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_COMPLETED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    started, completed = (attrs_of(e) for e in run.new_events[:2])
    assert (started.scheduled_event_id, started.identity, started.attempt) == (5, "aw", 1)
    assert started.request_id == "act-poll-1"
    assert not started.HasField("last_failure")
    assert (completed.scheduled_event_id, completed.started_event_id) == (5, 6)
    assert completed.result == payloads("the result")
    assert completed.identity == "act-worker"
    assert run.state.activities == {}
    run.run_wft(3, complete_workflow())
    assert run.types()[-1] == "WORKFLOW_EXECUTION_COMPLETED"


@pytest.mark.parametrize("in_flight", [False, True], ids=["written-at-once", "buffered"])
def test_started_event_keeps_the_attempt_start_time(in_flight):
    run = scheduled_run(start_to_close=30)
    run.start_activity(1, 5)
    if in_flight:
        run.signal(2, "s")
        run.start_wft(3)
    run.complete_activity(4, 5)
    if in_flight:
        run.complete_wft(5)

    [started] = [e for e in run.history if types([e]) == ["ACTIVITY_TASK_STARTED"]]
    assert event_time(started) == at(1)


def test_retries_leave_no_events_until_the_final_attempt():
    """FINDINGS s04: fails twice, then succeeds; Started has attempt 3 and the failure of attempt 2."""
    run = scheduled_run(start_to_close=10, retry_policy=policy(initial_interval=1, backoff_coefficient=2))
    run.start_activity(0.1, 5)
    run.fail_activity(0.2, 5, app_failure("flaky failure 1"))
    assert run.new_events == []
    [task] = run.new_tasks
    assert (task.scheduled_event_id, task.attempt, task.visible_at) == (5, 2, at(1.2))
    assert run.state.activities[5].started_time is None

    run.start_activity(1.2, 5)
    run.fail_activity(1.3, 5, app_failure("flaky failure 2"))
    assert run.new_events == []
    assert run.new_tasks[0].visible_at == at(3.3)  # 1 s, then 2 s

    run.start_activity(3.3, 5)
    run.complete_activity(3.4, 5)

    assert types(run.history[5:]) == [
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_COMPLETED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    started = attrs_of(run.event(6))
    assert started.attempt == 3
    assert started.last_failure.message == "flaky failure 2"
    assert started.last_failure.application_failure_info.type == "RuntimeError"
    assert attrs_of(run.event(7)).started_event_id == 6


def test_failure_of_the_last_attempt_writes_failed_with_its_retry_state():
    run = scheduled_run(start_to_close=10, retry_policy=policy(maximum_attempts=2))
    run.start_activity(1, 5)
    run.fail_activity(2, 5, app_failure("first"))
    run.start_activity(3, 5)
    run.fail_activity(4, 5, app_failure("second"))

    assert types(run.new_events) == [
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_FAILED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    started, failed = (attrs_of(e) for e in run.new_events[:2])
    assert (started.attempt, started.last_failure.message) == (2, "first")
    assert failed.failure.message == "second"
    assert failed.retry_state == RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED
    assert (failed.scheduled_event_id, failed.started_event_id, failed.identity) == (5, 6, "act-worker")
    assert not failed.failure.HasField("cause")


@pytest.mark.parametrize(
    ("failure", "retry_policy"),
    [
        (app_failure("fatal", type="MyFatal", non_retryable=True), None),
        (app_failure("typed", type="Bad"), policy(non_retryable_error_types=["Bad"])),
    ],
    ids=["non-retryable flag", "non-retryable type"],
)
def test_non_retryable_failure_is_final_at_once(failure, retry_policy):
    """FINDINGS s05."""
    run = scheduled_run(start_to_close=10, retry_policy=retry_policy)
    run.start_activity(1, 5)
    run.fail_activity(2, 5, failure)

    assert types(run.new_events) == [
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_FAILED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    failed = attrs_of(run.new_events[1])
    assert failed.retry_state == RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE
    assert failed.failure == failure
    assert attrs_of(run.new_events[0]).attempt == 1


def test_next_retry_delay_of_the_failure_replaces_the_backoff():
    run = scheduled_run(start_to_close=10)
    run.start_activity(1, 5)
    run.fail_activity(2, 5, app_failure(next_retry_delay=7))
    assert run.new_tasks[0].visible_at == at(9)
    assert run.state.activities[5].attempt_scheduled_time == at(9)


def test_next_retry_delay_above_the_maximum_interval_is_honoured():
    run = scheduled_run(start_to_close=10, retry_policy=policy(initial_interval=1, maximum_interval=10))
    run.start_activity(1, 5)
    run.fail_activity(2, 5, app_failure(next_retry_delay=30))
    assert run.new_tasks[0].visible_at == at(32)


def test_failure_without_time_for_another_attempt_is_final_with_retry_state_timeout():
    run = scheduled_run(now=0, schedule_to_close=10, start_to_close=5)
    run.start_activity(0, 5)
    run.fail_activity(8.5, 5, app_failure("one"))  # next attempt at 9.5 <= 10: retried
    assert run.new_events == []
    run.start_activity(9.5, 5)
    run.fail_activity(9.9, 5, app_failure("two"))  # next at 11.9 > 10

    assert types(run.new_events) == [
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_FAILED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    failed = attrs_of(run.new_events[1])
    assert failed.retry_state == RetryState.RETRY_STATE_TIMEOUT
    assert failed.failure.message == "two"  # the worker's failure, as reported


def test_start_to_close_timeout_without_time_for_another_attempt_becomes_a_schedule_to_close_timeout():
    run = scheduled_run(
        now=0, schedule_to_close=10, start_to_close=3, retry_policy=policy(initial_interval=3)
    )
    run.start_activity(0, 5)
    run.timeout_activity(3, 5, STC)  # retried at 6
    assert run.new_events == []
    run.start_activity(6, 5)
    run.timeout_activity(9, 5, STC)  # next at 15 > 10

    assert types(run.new_events) == [
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_TIMED_OUT",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    timed_out = attrs_of(run.new_events[1])
    assert timed_out.retry_state == RetryState.RETRY_STATE_TIMEOUT
    expected = timeout_failure(NOT_ENOUGH_TIME, S2C)
    expected.cause.CopyFrom(timeout_failure("activity StartToClose timeout", STC))
    assert timed_out.failure == expected
    assert attrs_of(run.new_events[0]).last_failure == timeout_failure("activity StartToClose timeout", STC)


@pytest.mark.parametrize("started", [True, False], ids=["while-running", "during-backoff"])
def test_schedule_to_close_timer_ends_the_activity(started):
    run = scheduled_run(
        now=0, schedule_to_close=10, start_to_close=4, retry_policy=policy(initial_interval=5)
    )
    run.start_activity(0, 5)
    run.fail_activity(1, 5, app_failure("attempt 1"))  # retried at 6
    if started:
        run.start_activity(6, 5)

    run.timeout_activity(10, 5, S2C, attempt=0)

    expected_types = ["ACTIVITY_TASK_TIMED_OUT", "WORKFLOW_TASK_SCHEDULED"]
    if started:
        expected_types.insert(0, "ACTIVITY_TASK_STARTED")
    assert types(run.new_events) == expected_types
    timed_out = attrs_of(run.new_events[-2])
    assert timed_out.retry_state == RetryState.RETRY_STATE_TIMEOUT
    assert timed_out.failure.timeout_failure_info.timeout_type == S2C
    assert timed_out.failure.source == "Server"
    assert timed_out.failure.cause.message == "attempt 1"
    assert timed_out.started_event_id == (run.new_events[0].event_id if started else 0)


def test_schedule_to_close_timer_failure_message_matches_temporal():
    run = scheduled_run(now=0, schedule_to_close=10, start_to_close=10)
    run.start_activity(0, 5)
    run.timeout_activity(10, 5, S2C, attempt=0)
    assert attrs_of(run.new_events[1]).failure.message == NOT_ENOUGH_TIME


def test_start_to_close_timeout_of_the_last_attempt_has_the_previous_failure_as_cause():
    """FINDINGS s06: start_to_close 1s, maximum_attempts 2."""
    run = scheduled_run(now=0.07, start_to_close=1, retry_policy=policy(maximum_attempts=2))
    run.start_activity(0.07, 5)
    run.timeout_activity(1.07, 5, STC)
    assert run.new_events == []
    assert run.new_tasks[0].visible_at == at(2.07)
    run.start_activity(2.08, 5)
    run.timeout_activity(3.08, 5, STC)

    assert types(run.new_events) == [
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_TIMED_OUT",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    started, timed_out = (attrs_of(e) for e in run.new_events[:2])
    attempt_failure = timeout_failure("activity StartToClose timeout", STC)
    assert (started.attempt, started.last_failure) == (2, attempt_failure)
    expected = timeout_failure("activity StartToClose timeout", STC)
    expected.cause.CopyFrom(attempt_failure)
    assert timed_out.failure == expected
    assert timed_out.retry_state == RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED
    assert (timed_out.scheduled_event_id, timed_out.started_event_id) == (5, 6)


def test_heartbeat_timer_is_re_armed_after_a_heartbeat_then_times_out_with_its_details():
    """FINDINGS s07: heartbeat timeout 1s, one heartbeat then silence, maximum_attempts 1."""
    run = scheduled_run(now=0, start_to_close=30, heartbeat=1, retry_policy=policy(maximum_attempts=1))
    run.start_activity(0.07, 5)
    assert run.heartbeat(0.5, 5, payloads("hb-detail-1")) is False

    run.timeout_activity(1.07, 5, HB)  # the timer armed at start: a heartbeat came since
    assert run.new_events == []
    [timer] = run.new_timers
    assert (timer.kind, timer.detail, timer.fire_at, timer.attempt) == (
        TimerKind.ACTIVITY_TIMEOUT,
        HB,
        at(1.5),
        1,
    )

    run.timeout_activity(1.5, 5, HB)

    assert types(run.new_events) == [
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_TIMED_OUT",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    timed_out = attrs_of(run.new_events[1])
    expected = timeout_failure("activity Heartbeat timeout", HB)
    expected.timeout_failure_info.last_heartbeat_details.CopyFrom(payloads("hb-detail-1"))
    assert timed_out.failure == expected  # no earlier attempt: no cause
    assert timed_out.retry_state == RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED


def test_heartbeat_timeout_without_any_heartbeat_counts_from_the_start():
    run = scheduled_run(now=0, start_to_close=30, heartbeat=2, retry_policy=policy(maximum_attempts=1))
    run.start_activity(1, 5)
    run.timeout_activity(3, 5, HB)
    assert types(run.new_events)[:2] == ["ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_TIMED_OUT"]


def test_schedule_to_start_timeout_writes_timed_out_without_a_started_event():
    run = scheduled_run(now=0, schedule_to_start=5, start_to_close=10)
    run.timeout_activity(5, 5, S2S)

    assert types(run.new_events) == ["ACTIVITY_TASK_TIMED_OUT", "WORKFLOW_TASK_SCHEDULED"]
    timed_out = attrs_of(run.new_events[0])
    assert timed_out.failure == timeout_failure("activity ScheduleToStart timeout", S2S)
    assert timed_out.retry_state == RetryState.RETRY_STATE_TIMEOUT
    assert timed_out.started_event_id == 0


@pytest.mark.parametrize(
    "fired", [S2C, S2S], ids=["schedule-to-close-row-first", "schedule-to-start-row-first"]
)
def test_unstarted_activity_whose_deadlines_coincide_times_out_schedule_to_start(fired):
    # Schedule-to-start defaults from schedule-to-close: both deadlines are the same instant, and
    # Temporal takes schedule-to-start first whichever timer row fires first.
    run = scheduled_run(now=0, schedule_to_close=10)
    assert attrs_of(run.history[4]).schedule_to_start_timeout.seconds == 10

    run.timeout_activity(10, 5, fired, attempt=0 if fired == S2C else 1)

    assert types(run.new_events) == ["ACTIVITY_TASK_TIMED_OUT", "WORKFLOW_TASK_SCHEDULED"]
    timed_out = attrs_of(run.new_events[0])
    assert timed_out.failure == timeout_failure("activity ScheduleToStart timeout", S2S)
    assert timed_out.retry_state == RetryState.RETRY_STATE_TIMEOUT
    assert not run.state.activities


def test_started_activity_whose_deadlines_coincide_times_out_schedule_to_close():
    run = scheduled_run(now=0, schedule_to_close=10)
    run.start_activity(1, 5)
    run.timeout_activity(10, 5, S2C, attempt=0)
    assert attrs_of(run.new_events[1]).failure.timeout_failure_info.timeout_type == S2C


def test_heartbeat_details_given_with_a_failure_are_kept_for_the_next_attempt():
    run = scheduled_run(now=0, start_to_close=10, retry_policy=policy(maximum_attempts=2))
    run.start_activity(0, 5)
    run.fail_activity(1, 5, app_failure(), details=payloads("progress-7"))
    assert run.state.activities[5].heartbeat_details == payloads("progress-7").SerializeToString()


# --- stale inputs --------------------------------------------------------------------------------------


def _retried() -> Run:
    run = scheduled_run(now=0, schedule_to_start=20, start_to_close=10, heartbeat=2)
    run.start_activity(0, 5)
    run.fail_activity(1, 5)  # attempt 2 scheduled at 2
    return run


def _running() -> Run:
    run = scheduled_run(now=0, schedule_to_start=20, start_to_close=10, heartbeat=2)
    run.start_activity(0, 5)
    return run


def _complete(run: Run, attempt: int) -> None:
    run.apply(3, activity.complete, scheduled_event_id=5, attempt=attempt, result=None, identity="w")


def _timeout(run: Run, attempt: int, timeout_type: int) -> None:
    run.apply(30, activity.time_out, scheduled_event_id=5, attempt=attempt, timeout_type=timeout_type)


STALE = [
    ("complete: attempt not started", _retried, lambda r: _complete(r, 2)),
    ("complete: old attempt", _retried, lambda r: _complete(r, 1)),
    ("complete: twice", _running, lambda r: (_complete(r, 1), _complete(r, 1))),
    (
        "complete: unknown activity",
        _running,
        lambda r: r.apply(3, activity.complete, scheduled_event_id=6, attempt=1, result=None, identity="w"),
    ),
    (
        "heartbeat: not started",
        _retried,
        lambda r: r.apply(3, activity.heartbeat, scheduled_event_id=5, attempt=2, details=None),
    ),
    ("start: twice", _running, lambda r: r.start_activity(1, 5)),
    (
        "start: wrong attempt",
        _retried,
        lambda r: r.apply(3, activity.start, scheduled_event_id=5, attempt=1, identity="w", request_id="x"),
    ),
    ("timer: start-to-close of an old attempt", _retried, lambda r: _timeout(r, 1, STC)),
    ("timer: heartbeat of an old attempt", _retried, lambda r: _timeout(r, 1, HB)),
    ("timer: start-to-close before start", _retried, lambda r: _timeout(r, 2, STC)),
    ("timer: schedule-to-start after start", _running, lambda r: _timeout(r, 1, S2S)),
    ("timer: activity closed", _running, lambda r: (_complete(r, 1), _timeout(r, 1, STC))),
]


@pytest.mark.parametrize(("make", "act"), [s[1:] for s in STALE], ids=[s[0] for s in STALE])
def test_stale_activity_inputs_raise_stale_task_and_change_nothing(make, act):
    run = make()
    before = run.copy_state()
    steps = len(run.steps)

    with pytest.raises(StaleTask):
        act(run)

    if len(run.steps) == steps:  # the stale call was the only one
        assert run.copy_state() == before


def test_worker_calls_on_a_closed_run_raise_run_closed():
    run = _running()
    run.signal(1, "s")
    run.run_wft(2, complete_workflow())
    for call in (
        lambda: _complete(run, 1),
        lambda: run.apply(3, activity.heartbeat, scheduled_event_id=5, attempt=1, details=None),
        lambda: run.apply(
            3,
            activity.fail,
            scheduled_event_id=5,
            attempt=1,
            failure=app_failure(),
            identity="w",
            last_heartbeat_details=None,
        ),
    ):
        with pytest.raises(RunClosed):
            call()
    with pytest.raises(StaleTask):
        _timeout(run, 1, STC)
    with pytest.raises(StaleTask):
        run.apply(3, activity.start, scheduled_event_id=5, attempt=1, identity="w", request_id="x")


# --- cancellation --------------------------------------------------------------------------------------


def _second_task(run: Run, now: float):
    run.signal(now, "cancel it")
    return run.run_wft(now + 0.1, request_cancel_activity(5))


@pytest.mark.parametrize("in_backoff", [False, True], ids=["never-started", "in-retry-backoff"])
def test_cancel_of_an_activity_not_running_is_immediate(in_backoff):
    run = scheduled_run(now=0, start_to_close=10)
    if in_backoff:
        run.start_activity(0.5, 5)
        run.fail_activity(0.6, 5)
    _second_task(run, 1)

    assert types(run.new_events) == [
        "WORKFLOW_TASK_COMPLETED",
        "ACTIVITY_TASK_CANCEL_REQUESTED",
        "ACTIVITY_TASK_CANCELED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    completed, requested, canceled, _ = run.new_events
    assert attrs_of(requested).scheduled_event_id == 5
    assert attrs_of(requested).workflow_task_completed_event_id == completed.event_id
    canceled_attrs = attrs_of(canceled)
    assert canceled_attrs.details.payloads == [
        Payload(metadata={"encoding": b"json/plain"}, data=b'"ACTIVITY_ID_NOT_STARTED"')
    ]
    assert canceled_attrs.latest_cancel_requested_event_id == requested.event_id
    assert (canceled_attrs.scheduled_event_id, canceled_attrs.started_event_id) == (5, 0)
    assert canceled_attrs.identity == WORKER
    assert run.state.activities == {}
    assert [(t.kind, t.attempt) for t in run.new_tasks] == [(TaskKind.WORKFLOW, 1)]


def test_cancel_of_a_running_activity_is_requested_reported_by_heartbeat_and_confirmed():
    """FINDINGS s11_cancel_activity_wait_completed."""
    run = scheduled_run(now=0, start_to_close=30, heartbeat=5)
    run.start_activity(0.019, 5)
    assert run.heartbeat(0.5, 5) is False
    _second_task(run, 1)

    assert types(run.new_events) == ["WORKFLOW_TASK_COMPLETED", "ACTIVITY_TASK_CANCEL_REQUESTED"]
    requested_id = run.new_events[1].event_id
    assert run.new_tasks == []
    assert run.heartbeat(4, 5) is True

    run.apply(
        4.04, activity.canceled, scheduled_event_id=5, attempt=1, details=payloads("bye"), identity="aw"
    )

    assert types(run.new_events) == [
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_CANCELED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    started_id = run.new_events[0].event_id
    canceled = attrs_of(run.new_events[1])
    assert (canceled.latest_cancel_requested_event_id, canceled.scheduled_event_id) == (requested_id, 5)
    assert (canceled.started_event_id, canceled.identity) == (started_id, "aw")
    assert canceled.details == payloads("bye")


def test_failure_after_a_cancel_request_is_final_with_cancel_requested():
    run = scheduled_run(now=0, start_to_close=30)
    run.start_activity(0.5, 5)
    _second_task(run, 1)
    run.fail_activity(2, 5)

    assert types(run.new_events)[:2] == ["ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_FAILED"]
    assert attrs_of(run.new_events[1]).retry_state == RetryState.RETRY_STATE_CANCEL_REQUESTED


def test_cancel_of_an_unknown_activity_fails_the_workflow_task():
    run = scheduled_run(now=0, start_to_close=30)
    run.signal(1, "s")
    failure = run.run_wft(2, request_cancel_activity(99))
    assert failure is not None
    assert failure.cause == Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_REQUEST_CANCEL_ACTIVITY_ATTRIBUTES


def test_cancel_of_an_activity_whose_result_is_buffered_is_recorded():
    run = scheduled_run(now=0, start_to_close=30)
    run.start_activity(0.5, 5)
    run.signal(1, "s")
    run.start_wft(1.1)
    run.complete_activity(1.2, 5)  # buffered: the workflow has not seen it

    failure = run.complete_wft(1.3, request_cancel_activity(5))

    assert failure is None
    assert types(run.new_events) == [
        "WORKFLOW_TASK_COMPLETED",
        "ACTIVITY_TASK_CANCEL_REQUESTED",
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_COMPLETED",
        "WORKFLOW_TASK_SCHEDULED",
    ]


def test_second_cancel_request_for_the_same_activity_fails_the_task():
    run = scheduled_run(now=0, start_to_close=30)
    run.start_activity(0.5, 5)
    _second_task(run, 1)
    failure = _second_task(run, 2)
    assert failure is not None
    assert failure.cause == Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_REQUEST_CANCEL_ACTIVITY_ATTRIBUTES


def test_cancel_confirmation_without_a_cancel_request_is_refused():
    run = scheduled_run(now=0, start_to_close=30)
    run.start_activity(0.5, 5)

    try:
        run.apply(1, activity.canceled, scheduled_event_id=5, attempt=1, details=None, identity="aw")
    except EngineError as error:
        raised: EngineError | None = error
    else:
        raised = None

    assert raised is not None
    assert raised.code == "INVALID_ARGUMENT"
    assert run.state.activities[5].started_time is not None
    assert types(run.history)[-1] == "ACTIVITY_TASK_SCHEDULED"


@pytest.mark.parametrize(("start_to_close", "fires_after"), [(0.2, 1.0), (0.99, 1.0), (1.5, 1.5), (30, 30)])
def test_a_sub_second_start_to_close_timeout_fires_after_a_second_as_temporals_do(
    start_to_close, fires_after
):
    run = scheduled_run(now=0, start_to_close=start_to_close)
    run.start_activity(2, 5)
    [timer] = [t for t in run.new_timers if t.detail == STC]
    assert timer.fire_at == at(2 + fires_after)
