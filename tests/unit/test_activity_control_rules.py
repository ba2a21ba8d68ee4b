"""Operator controls of pending activities: pause, unpause, reset and option updates (no events, ever)."""

from __future__ import annotations

from datetime import datetime

import msgspec
import pytest
from temporalio.api.activity.v1 import ActivityOptions
from temporalio.api.common.v1 import RetryPolicy
from temporalio.api.enums.v1 import RetryState, TaskQueueKind, TimeoutType
from temporalio.api.taskqueue.v1 import TaskQueue

from engine.errors import FailedPrecondition, InvalidArgument, NotFound
from engine.history import activity, activity_control
from engine.history import state as state_module
from engine.history.activity_control import ACTIVITY_NOT_FOUND, Target
from engine.history.errors import RunClosed, StaleTask
from engine.history.events import seconds
from engine.history.mutation import TaskKind, TimerKind
from tests.unit.history_harness import (
    TASK_QUEUE,
    Run,
    app_failure,
    at,
    attrs_of,
    complete_workflow,
    dur,
    payloads,
    schedule_activity,
    start_request,
    types,
)

SID = 5
STC = TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE
S2S = TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START
S2C = TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE
HB = TimeoutType.TIMEOUT_TYPE_HEARTBEAT
BY_ID = Target(activity_id="1")


def scheduled_run(*, maximum_attempts: int = 5, **command) -> Run:
    """A run whose first workflow task scheduled activity "1" (ActivityTaskScheduled is event 5)."""
    command.setdefault("start_to_close", 30)
    run = Run(start_request())
    policy = RetryPolicy(maximum_attempts=maximum_attempts, initial_interval=dur(1))
    assert run.run_wft(0.1, schedule_activity("1", retry_policy=policy, **command)) is None
    return run


def info(run: Run):
    return run.state.activities[SID]


def start(run: Run, now: float, **row):
    """Start the current attempt as a poller would, from a task row (`task_queue`, `visible_at`)."""
    return run.apply(
        now,
        activity.start,
        scheduled_event_id=SID,
        attempt=info(run).attempt,
        identity="act-worker",
        request_id=f"poll-{now}",
        **row,
    )


def pause(run: Run, now: float, target: Target = BY_ID, request_id: str = "") -> None:
    run.apply(now, activity_control.pause, target=target, identity="me", reason="why", request_id=request_id)


def activity_timers(run: Run) -> list[tuple[int, int, object]]:
    return sorted(
        (t.detail, t.attempt, t.fire_at) for t in run.new_timers if t.kind == TimerKind.ACTIVITY_TIMEOUT
    )


def dropped_all_timers(run: Run) -> bool:
    return any(
        d.kind == TimerKind.ACTIVITY_TIMEOUT and d.event_id == SID and d.attempt is None
        for d in run.last.dead_timers
    )


def update(run: Run, now: float, paths: list[str] | None, **options) -> ActivityOptions:
    return run.apply(
        now,
        activity_control.update_options,
        target=BY_ID,
        options=ActivityOptions(**options),
        paths=paths,
    )


# --- selecting -----------------------------------------------------------------------------------------


def test_controls_name_activities_by_id_type_or_all():
    run = Run(start_request())
    run.run_wft(
        0.1,
        schedule_activity("a", activity_type="one", start_to_close=10),
        schedule_activity("b", activity_type="two", start_to_close=10),
        schedule_activity("c", activity_type="one", start_to_close=10),
    )
    pause(run, 1, Target(activity_type="one"))
    assert {a.activity_id: a.paused for a in run.state.activities.values()} == {
        "a": True,
        "b": False,
        "c": True,
    }
    run.apply(2, activity_control.unpause, target=Target(match_all=True))
    assert not any(a.paused for a in run.state.activities.values())
    # unpause only dispatches what was paused
    assert sorted(t.scheduled_event_id for t in run.new_tasks) == [5, 7]


@pytest.mark.parametrize(
    "target", [Target(activity_id="nope"), Target(activity_type="nope")], ids=["id", "type"]
)
def test_no_matching_activity_is_not_found(target):
    run = scheduled_run()
    for control in (activity_control.pause, activity_control.unpause, activity_control.reset):
        kwargs = {"identity": "", "reason": "", "request_id": ""} if control is activity_control.pause else {}
        with pytest.raises(NotFound, match="^" + ACTIVITY_NOT_FOUND.replace("(", r"\(") + "$"):
            run.apply(1, control, target=target, **kwargs)


def test_controls_on_a_closed_run_say_it_completed():
    run = Run(start_request())
    run.run_wft(0.1, schedule_activity("1", start_to_close=10), complete_workflow())
    with pytest.raises(RunClosed, match="workflow execution already completed"):
        pause(run, 1)
    with pytest.raises(RunClosed):
        update(run, 1, ["heartbeat_timeout"])


# --- pause ---------------------------------------------------------------------------------------------


def test_pause_writes_no_event_and_keeps_the_attempt_from_being_dispatched():
    run = scheduled_run(schedule_to_close=60)
    before = len(run.history)
    pause(run, 1)
    assert len(run.history) == before
    a = info(run)
    assert (a.paused, a.pause_time, a.pause_identity, a.pause_reason) == (True, at(1), "me", "why")
    assert dropped_all_timers(run)
    assert run.new_timers == []
    assert run.new_tasks == []
    with pytest.raises(StaleTask):  # the task row queued before the pause
        start(run, 2, task_queue=TASK_QUEUE, visible_at=at(0.1))
    with pytest.raises(StaleTask):  # its timeouts wait for the unpause
        run.timeout_activity(60.1, SID, S2C)


def test_pause_again_is_a_no_op_for_the_same_request_and_refused_for_another():
    run = scheduled_run()
    pause(run, 1, request_id="r1")
    pause(run, 2, request_id="r1")
    assert info(run).pause_time == at(1)
    with pytest.raises(FailedPrecondition, match="^activity is already paused$"):
        pause(run, 3, request_id="r2")
    # two requests without an id count as the same (Temporal compares the ids)
    run2 = scheduled_run()
    pause(run2, 1)
    pause(run2, 2)


def test_a_paused_running_attempt_runs_on_its_heartbeat_says_paused_and_its_result_counts():
    run = scheduled_run()
    start(run, 1)
    pause(run, 2)
    assert run.heartbeat_answer(3, SID) == activity.HeartbeatAnswer(cancel_requested=False, paused=True)
    run.complete_activity(4, SID)
    assert types(run.new_events)[:2] == ["ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_COMPLETED"]
    assert SID not in run.state.activities


def test_a_paused_attempt_that_fails_is_not_retried_even_past_its_maximum_attempts():
    run = scheduled_run(maximum_attempts=1)
    start(run, 1)
    pause(run, 2)
    run.fail_activity(3, SID, app_failure("boom"), details=payloads("progress"))
    a = info(run)
    assert (a.attempt, a.started_time, a.paused) == (2, None, True)
    assert a.last_failure
    assert a.heartbeat_details
    assert a.last_attempt_complete_time == at(3)
    assert run.new_events == []
    assert run.new_tasks == []
    assert run.new_timers == []


def test_a_paused_attempt_failing_for_good_still_ends_the_activity():
    run = scheduled_run()
    start(run, 1)
    pause(run, 2)
    run.fail_activity(3, SID, app_failure("fatal", non_retryable=True))
    failed = attrs_of(run.new_events[1])
    assert failed.retry_state == RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE


# --- unpause -------------------------------------------------------------------------------------------


def test_unpause_dispatches_the_waiting_attempt_now_and_the_old_row_is_stale():
    run = scheduled_run(schedule_to_start=20)
    start(run, 1)
    pause(run, 2)
    run.fail_activity(3, SID)
    run.apply(10, activity_control.unpause, target=BY_ID)
    a = info(run)
    assert (a.paused, a.pause_time, a.attempt, a.attempt_scheduled_time) == (False, None, 2, at(10))
    assert a.last_failure == b""  # Temporal's RegenerateActivityRetryTask forgets it
    [task] = run.new_tasks
    assert (task.kind, task.task_queue, task.attempt, task.visible_at) == (
        TaskKind.ACTIVITY,
        TASK_QUEUE,
        2,
        at(10),
    )
    assert activity_timers(run) == [(S2S, 2, at(30))]
    with pytest.raises(StaleTask):
        start(run, 11, task_queue=TASK_QUEUE, visible_at=at(3))
    start(run, 11, task_queue=TASK_QUEUE, visible_at=at(10))


def test_unpause_with_jitter_resets_and_of_an_activity_not_paused():
    run = scheduled_run()
    start(run, 1, task_queue=TASK_QUEUE, visible_at=at(0.1))
    run.heartbeat(2, SID, payloads("hb"))
    pause(run, 3)
    run.fail_activity(4, SID)  # attempt 2 waits for the unpause
    run.apply(
        10,
        activity_control.unpause,
        target=BY_ID,
        reset_attempts=True,
        reset_heartbeat=True,
        jitter=8,
        draw=lambda: 0.25,
    )
    a = info(run)
    assert (a.attempt, a.heartbeat_details, a.last_heartbeat_time) == (1, b"", None)
    assert [(t.attempt, t.visible_at) for t in run.new_tasks] == [(1, at(12))]
    run.apply(11, activity_control.unpause, target=BY_ID)  # not paused: nothing happens
    assert run.new_tasks == []
    assert run.last.dead_timers == []


def test_unpause_of_a_running_attempt_arms_its_timeouts_again():
    run = scheduled_run(heartbeat=5)
    start(run, 1)
    run.heartbeat(2, SID)
    pause(run, 3)
    with pytest.raises(StaleTask):
        run.timeout_activity(7, SID, HB)
    run.apply(8, activity_control.unpause, target=BY_ID)
    assert run.new_tasks == []
    assert activity_timers(run) == [(STC, 1, at(31)), (HB, 1, at(7))]


# --- reset ---------------------------------------------------------------------------------------------


def test_reset_of_a_running_first_attempt_is_reported_by_heartbeat_until_the_next_attempt():
    run = scheduled_run()
    start(run, 1)
    run.apply(2, activity_control.reset, target=BY_ID)
    assert run.new_tasks == []
    assert run.heartbeat_answer(3, SID) == activity.HeartbeatAnswer(cancel_requested=False, reset=True)
    run.fail_activity(4, SID)
    a = info(run)
    assert (a.attempt, a.reset_requested) == (2, False)


def test_reset_of_a_running_later_attempt_makes_its_token_stale_and_times_it_out_as_attempt_1():
    run = scheduled_run()
    start(run, 1)
    run.fail_activity(2, SID)
    start(run, 3)
    run.apply(4, activity_control.reset, target=BY_ID)
    assert info(run).attempt == 1
    with pytest.raises(StaleTask):
        run.heartbeat_answer(5, SID, attempt=2)
    assert (STC, 1, at(33)) in activity_timers(run)
    run.timeout_activity(33, SID, STC, attempt=1)
    assert info(run).attempt == 2


def test_reset_of_an_attempt_in_backoff_dispatches_attempt_1_now():
    run = scheduled_run()
    start(run, 1)
    run.heartbeat(1.5, SID, payloads("hb"))
    run.fail_activity(2, SID)
    assert info(run).attempt_scheduled_time == at(3)
    run.apply(2.5, activity_control.reset, target=BY_ID, reset_heartbeat=True)
    a = info(run)
    assert (a.attempt, a.attempt_scheduled_time, a.heartbeat_details, a.reset_requested) == (
        1,
        at(2.5),
        b"",
        False,
    )
    assert [(t.attempt, t.visible_at) for t in run.new_tasks] == [(1, at(2.5))]
    with pytest.raises(StaleTask):  # the backoff's row names attempt 2
        run.apply(3, activity.start, scheduled_event_id=SID, attempt=2, identity="w", request_id="r")


def test_reset_of_a_running_attempt_with_reset_heartbeat_clears_details_for_the_next_attempt():
    run = scheduled_run()
    start(run, 1)
    run.apply(2, activity_control.reset, target=BY_ID, reset_heartbeat=True)
    run.heartbeat(3, SID, payloads("still running"))
    assert info(run).heartbeat_details
    run.fail_activity(4, SID)
    assert info(run).heartbeat_details == b""


@pytest.mark.parametrize("keep_paused", [True, False])
def test_reset_of_a_paused_activity_keeps_it_paused_only_when_asked(keep_paused):
    run = scheduled_run()
    start(run, 1)
    pause(run, 2)
    run.fail_activity(3, SID)
    run.apply(4, activity_control.reset, target=BY_ID, keep_paused=keep_paused)
    a = info(run)
    assert (a.attempt, a.paused) == (1, keep_paused)
    assert [(t.attempt, t.visible_at) for t in run.new_tasks] == ([] if keep_paused else [(1, at(4))])


# --- options -------------------------------------------------------------------------------------------


def test_update_options_merges_the_masked_fields_and_returns_the_options_in_force():
    run = scheduled_run(heartbeat=20)
    result = update(
        run,
        1,
        ["task_queue.name", "startToCloseTimeout", "retry_policy.maximum_attempts", "heartbeat_timeout"],
        task_queue=TaskQueue(name="other"),
        start_to_close_timeout=dur(10),
        heartbeat_timeout=dur(60),
        retry_policy=RetryPolicy(maximum_attempts=7, initial_interval=dur(99)),
    )
    assert result.task_queue == TaskQueue(name="other", kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL)
    assert seconds(result.start_to_close_timeout) == 10
    assert seconds(result.heartbeat_timeout) == 10  # capped at start-to-close, as a command's is
    assert (result.retry_policy.maximum_attempts, seconds(result.retry_policy.initial_interval)) == (7, 1)
    a = info(run)
    assert (a.task_queue, a.start_to_close, a.heartbeat) == ("other", 10, 10)
    assert activity.retry_policy(a).maximum_attempts == 7
    assert activity_control.current_options(a).retry_policy == result.retry_policy
    # The waiting attempt moves to the new queue; the row on the old one is stale.
    assert [(t.task_queue, t.attempt, t.visible_at) for t in run.new_tasks] == [("other", 1, at(1))]
    with pytest.raises(StaleTask):
        start(run, 2, task_queue=TASK_QUEUE, visible_at=at(0.1))
    start(run, 2, task_queue="other", visible_at=at(1))
    # Workers are still handed the scheduled timeouts, with the retry policy in force (as Temporal does).
    handed = activity.dispatch_attributes(info(run))
    assert seconds(handed.start_to_close_timeout) == 30
    assert handed.retry_policy.maximum_attempts == 7


def test_update_options_of_a_running_attempt_moves_its_timeouts():
    run = scheduled_run()
    start(run, 1)
    update(run, 2, ["start_to_close_timeout"], start_to_close_timeout=dur(5))
    assert run.new_tasks == []
    assert dropped_all_timers(run)
    assert activity_timers(run) == [(STC, 1, at(6))]


def test_updated_retry_policy_decides_the_next_retry():
    run = scheduled_run(maximum_attempts=1)
    update(run, 1, ["retry_policy.maximum_attempts"], retry_policy=RetryPolicy(maximum_attempts=3))
    start(run, 2)
    run.fail_activity(3, SID)
    assert info(run).attempt == 2


def test_update_options_of_an_attempt_in_backoff_reschedules_it_by_the_new_policy():
    run = scheduled_run()
    start(run, 1)
    run.fail_activity(2, SID)  # attempt 2 due at 3 (1s backoff)
    update(run, 2.5, ["retry_policy.initial_interval"], retry_policy=RetryPolicy(initial_interval=dur(10)))
    # Temporal's GetNextScheduledTime: last completion + initial * coefficient ** (attempt - 1)
    assert info(run).attempt_scheduled_time == at(22)
    assert [(t.attempt, t.visible_at) for t in run.new_tasks] == [(2, at(22))]
    with pytest.raises(StaleTask):
        start(run, 3, task_queue=TASK_QUEUE, visible_at=at(3))


def test_restore_original_options():
    run = scheduled_run()
    update(run, 1, ["start_to_close_timeout"], start_to_close_timeout=dur(99))
    result = run.apply(
        2, activity_control.update_options, target=BY_ID, options=None, paths=None, restore_original=True
    )
    assert seconds(result.start_to_close_timeout) == 30
    assert result.task_queue == TaskQueue(name=TASK_QUEUE)
    assert info(run).start_to_close == 30


@pytest.mark.parametrize(
    ("options", "paths", "restore", "message"),
    [
        (ActivityOptions(), ["heartbeat_timeout"], True, "Both UpdateMask and RestoreOriginal are provided"),
        (None, ["heartbeat_timeout"], False, "ActivityOptions are not provided"),
        (ActivityOptions(), None, False, "UpdateMask is not provided"),
        (ActivityOptions(), ["task_queue.name"], False, "TaskQueue is not provided"),
        (ActivityOptions(), ["retry_policy.maximum_attempts"], False, "RetryPolicy is not provided"),
        (
            ActivityOptions(retry_policy=RetryPolicy(backoff_coefficient=0.5)),
            ["retry_policy.backoff_coefficient"],
            False,
            "BackoffCoefficient cannot be less than 1 on retry policy.",
        ),
        (
            ActivityOptions(retry_policy=RetryPolicy(maximum_interval=dur(0.5))),
            ["retry_policy.maximum_interval"],
            False,
            "MaximumInterval cannot be less than InitialInterval on retry policy.",
        ),
        (
            ActivityOptions(),
            ["start_to_close_timeout"],
            False,
            "a valid StartToCloseTimeout or ScheduleToCloseTimeout must be set on the activity. "
            "ActivityId=1 ActivityType=do_it",
        ),
        (
            ActivityOptions(heartbeat_timeout=dur(-5)),
            ["heartbeat_timeout"],
            False,
            "invalid HeartbeatTimeout: negative duration",
        ),
    ],
)
def test_bad_option_updates_are_refused_with_temporals_messages(options, paths, restore, message):
    run = scheduled_run()
    with pytest.raises(InvalidArgument) as error:
        run.apply(
            1,
            activity_control.update_options,
            target=BY_ID,
            options=options,
            paths=paths,
            restore_original=restore,
        )
    assert error.value.message == message


def test_update_with_an_unknown_path_changes_nothing():
    run = scheduled_run()
    result = update(run, 1, ["bogus"])
    assert result.task_queue.name == TASK_QUEUE
    assert seconds(result.start_to_close_timeout) == 30


# --- stored state --------------------------------------------------------------------------------------


def test_state_stored_before_activity_controls_still_loads():
    run = scheduled_run()
    raw = msgspec.to_builtins(run.state, builtin_types=(bytes, datetime))
    new_fields = {
        "last_attempt_complete_time",
        "task_visible_at",
        "paused",
        "pause_time",
        "pause_identity",
        "pause_reason",
        "pause_request_id",
        "reset_requested",
        "reset_heartbeats",
        "retry_policy",
        "priority",
    }
    for a in raw["activities"].values():
        for name in new_fields:
            a.pop(name)
    loaded = state_module.load(msgspec.msgpack.encode(raw))
    a = loaded.activities[SID]
    assert (a.paused, a.retry_policy, a.task_visible_at) == (False, None, None)
    assert activity.retry_policy(a).maximum_attempts == 5
